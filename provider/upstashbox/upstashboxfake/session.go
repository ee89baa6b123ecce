package upstashboxfake

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/upstashbox"
)

// maxExecOutput bounds what an HTTP exec answers per stream.
const maxExecOutput = 16 << 20

// capped keeps the first n bytes written to it and drops the rest.
type capped struct {
	b bytes.Buffer
	n int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.n - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// start starts argv in folder (HTTP exec: no environment of its own).
func (f *Fake) start(w http.ResponseWriter, b *box, req upstashbox.ExecRequest) (*fakecloud.Proc, bool) {
	if len(req.Command) == 0 {
		writeError(w, http.StatusBadRequest, "command is required")
		return nil, false
	}
	p, err := b.fc.Start(fakecloud.Spec{Argv: req.Command, Dir: hostPath(b, req.Folder)})
	if err != nil {
		writeError(w, http.StatusBadRequest, "exec failed: %v", err)
		return nil, false
	}
	return p, true
}

// exec runs a command to its end and answers its output and exit code.
func (f *Fake) exec(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	var req upstashbox.ExecRequest
	if !decode(w, r, &req) {
		return
	}
	p, ok := f.start(w, b, req)
	if !ok {
		return
	}
	defer p.Release()
	out, errb := &capped{n: maxExecOutput}, &capped{n: maxExecOutput}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(out, p.Stdout()) })
	wg.Go(func() { _, _ = io.Copy(errb, p.Stderr()) })
	wg.Wait()
	<-p.Done()
	fakecloud.WriteJSON(w, http.StatusOK, upstashbox.ExecResult{Output: out.b.String(), Error: errb.b.String(), ExitCode: p.ExitCode()})
}

// execStream streams the output (stdout and stderr as they come), then
// the exit event.
func (f *Fake) execStream(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	var req upstashbox.ExecRequest
	if !decode(w, r, &req) {
		return
	}
	p, ok := f.start(w, b, req)
	if !ok {
		return
	}
	defer p.Release()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rd := range []io.Reader{p.Stdout(), p.Stderr()} {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := rd.Read(buf)
				if n > 0 {
					mu.Lock()
					_, _ = w.Write(buf[:n])
					if fl != nil {
						fl.Flush()
					}
					mu.Unlock()
				}
				if err != nil {
					return
				}
			}
		})
	}
	go func() {
		<-r.Context().Done()
		p.Disconnected()
	}()
	wg.Wait()
	<-p.Done()
	fmt.Fprintf(w, "event: exit\ndata: {\"exit_code\":%d,\"cpu_ns\":0}\n\n", p.ExitCode())
}

var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP}

// session is the exec session WebSocket: one command per connection.
func (f *Fake) session(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	dropAfter, drop := fakecloud.StreamFault(r.Context())
	faultCtx := r.Context()
	conn, err := fakecloud.AcceptWebSocket(w, r)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wmu sync.Mutex
	send := func(m upstashbox.Frame) error {
		data, _ := json.Marshal(m)
		wmu.Lock()
		defer wmu.Unlock()
		return conn.Write(ctx, websocket.MessageText, data)
	}
	// sendData writes an output frame as encoding/json would
	// ({"type":…,"data":…}: base64 needs no escaping), without its per-byte
	// scan of the payload.
	var frame []byte
	sendData := func(kind string, chunk []byte) error {
		prefix := `{"type":"` + kind + `","data":"`
		need := len(prefix) + base64.StdEncoding.EncodedLen(len(chunk)) + 2
		if cap(frame) < need {
			frame = make([]byte, 0, need)
		}
		frame = append(frame[:0], prefix...)
		frame = frame[:need]
		base64.StdEncoding.Encode(frame[len(prefix):], chunk)
		copy(frame[need-2:], `"}`)
		wmu.Lock()
		defer wmu.Unlock()
		return conn.Write(ctx, websocket.MessageText, frame)
	}
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
	typ, data, err := conn.Read(hctx)
	hcancel()
	var st upstashbox.Frame
	if err != nil || typ != websocket.MessageText || json.Unmarshal(data, &st) != nil || st.Type != "start" {
		_ = send(upstashbox.Frame{Type: "error", Message: "expected a start frame"})
		return
	}
	argv := st.Argv
	if len(argv) == 0 && st.Cmd != "" {
		argv = []string{"sh", "-c", st.Cmd}
	}
	if len(argv) == 0 {
		_ = send(upstashbox.Frame{Type: "error", Message: "start needs cmd or argv"})
		return
	}
	p, err := b.fc.Start(fakecloud.Spec{Argv: argv, Env: st.Env, Dir: hostPath(b, st.Cwd), Stdin: true})
	if err != nil {
		_ = send(upstashbox.Frame{Type: "error", Message: err.Error()})
		return
	}
	defer p.Release()
	group := func(sig syscall.Signal) { _ = syscall.Kill(-p.PID(), sig) }
	if err := send(upstashbox.Frame{Type: "started", PID: p.PID(), ExecID: newID("exec_")}); err != nil {
		p.Disconnected()
		return
	}
	var (
		gone, exited atomic.Bool
		sent         atomic.Int64
		dropOnce     sync.Once
	)
	disconnect := func() {
		if exited.Load() || !gone.CompareAndSwap(false, true) {
			return
		}
		p.CloseStdin()
		p.Disconnected() // the command dies with its socket
	}
	out := func(kind string, chunk []byte, total *int64) {
		if gone.Load() {
			return
		}
		if *total+int64(len(chunk)) > upstashbox.MaxSessionStream {
			chunk = chunk[:max(0, upstashbox.MaxSessionStream-*total)]
			defer group(syscall.SIGTERM)
		}
		if drop && sent.Load()+int64(len(chunk)) >= int64(dropAfter) {
			chunk = chunk[:max(0, int64(dropAfter)-sent.Load())]
			if len(chunk) > 0 {
				_ = send(upstashbox.Frame{Type: kind, Data: base64.StdEncoding.EncodeToString(chunk)})
			}
			dropOnce.Do(func() { fakecloud.NoteDrop(faultCtx) })
			conn.CloseNow()
			disconnect()
			return
		}
		if len(chunk) == 0 {
			return
		}
		*total += int64(len(chunk))
		sent.Add(int64(len(chunk)))
		if err := sendData(kind, chunk); err != nil {
			disconnect()
		}
	}
	var omu sync.Mutex // one output frame at a time, so the drop budget is exact
	var outs sync.WaitGroup
	for kind, rd := range map[string]io.Reader{"stdout": p.Stdout(), "stderr": p.Stderr()} {
		outs.Go(func() {
			var total int64
			buf := make([]byte, 64<<10)
			for {
				n, err := rd.Read(buf)
				if n > 0 {
					omu.Lock()
					out(kind, buf[:n], &total)
					omu.Unlock()
				}
				if err != nil {
					return
				}
			}
		})
	}
	go func() {
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				disconnect()
				return
			}
			var m upstashbox.Frame
			if typ != websocket.MessageText || json.Unmarshal(data, &m) != nil {
				continue
			}
			switch m.Type {
			case "stdin":
				d, err := base64.StdEncoding.DecodeString(m.Data)
				if err == nil {
					_, _ = p.WriteStdin(d)
				}
			case "stdin_close":
				p.CloseStdin()
			case "signal":
				sig, ok := signals[m.Signal]
				if !ok {
					sig = syscall.SIGTERM
				}
				group(sig)
			case "terminate":
				group(syscall.SIGTERM)
				grace := time.Duration(m.GraceMs) * time.Millisecond
				go func() {
					t := time.NewTimer(grace)
					defer t.Stop()
					select {
					case <-p.Done():
					case <-t.C:
						group(syscall.SIGKILL)
					}
				}()
			}
		}
	}()
	outs.Wait()
	<-p.Done()
	if gone.Load() {
		return
	}
	code := p.ExitCode()
	exited.Store(true)
	if err := send(upstashbox.Frame{Type: "exit", Code: &code}); err != nil {
		return
	}
	_ = conn.Close(websocket.StatusNormalClosure, "")
}
