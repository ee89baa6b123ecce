// Package fake is the loopback backend of the reference provider
// (provider/internal/refcloud), built from internal/fakecloud:
// the protocol the refcloud package doc describes, on the kit's server,
// sandboxes and processes. Routes (for faults and counts) are named
// create, get, list, delete, process, signal and exec.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/internal/refcloud"
)

// New starts the fake with the kit's options.
func New(opts fakecloud.Options) (*fakecloud.Server, error) {
	s, err := fakecloud.New(opts)
	if err != nil {
		return nil, err
	}
	f := &backend{s: s}
	s.Handle("create", "POST /v1/sandboxes", f.create)
	s.Handle("list", "GET /v1/sandboxes", f.list)
	s.Handle("get", "GET /v1/sandboxes/{id}", f.get)
	s.Handle("delete", "DELETE /v1/sandboxes/{id}", f.delete)
	s.Handle("process", "GET /v1/sandboxes/{id}/processes/{pid}", f.process)
	s.Handle("signal", "POST /v1/sandboxes/{id}/processes/{pid}/signal", f.signal)
	s.Handle("exec", "GET /v1/sandboxes/{id}/exec", f.exec)
	return s, nil
}

type backend struct{ s *fakecloud.Server }

func wire(sb *fakecloud.Sandbox) refcloud.Sandbox {
	return refcloud.Sandbox{ID: sb.ID, Name: sb.Name, Labels: sb.Labels, Root: sb.Root, CreatedAt: sb.Created}
}

func (f *backend) create(w http.ResponseWriter, r *http.Request) {
	var req refcloud.CreateRequest
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		fakecloud.WriteError(w, http.StatusBadRequest, "%v", err)
		return
	}
	sb, err := f.s.CreateSandbox(req.Name, req.Labels)
	switch {
	case errors.Is(err, fakecloud.ErrNameTaken):
		fakecloud.WriteError(w, http.StatusConflict, "a sandbox named %q exists", req.Name)
	case err != nil:
		fakecloud.WriteError(w, http.StatusInternalServerError, "%v", err)
	default:
		fakecloud.WriteJSON(w, http.StatusCreated, wire(sb))
	}
}

func (f *backend) list(w http.ResponseWriter, r *http.Request) {
	labels := map[string]string{}
	for _, kv := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			fakecloud.WriteError(w, http.StatusBadRequest, "label filter %q is not K=V", kv)
			return
		}
		labels[k] = v
	}
	out := refcloud.ListResponse{Sandboxes: []refcloud.Sandbox{}}
	for _, sb := range f.s.Sandboxes(r.URL.Query().Get("name"), labels) {
		out.Sandboxes = append(out.Sandboxes, wire(sb))
	}
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *backend) sandbox(w http.ResponseWriter, r *http.Request) (*fakecloud.Sandbox, bool) {
	sb, ok := f.s.Sandbox(r.PathValue("id"))
	if !ok {
		fakecloud.WriteError(w, http.StatusNotFound, "sandbox %q not found", r.PathValue("id"))
	}
	return sb, ok
}

func (f *backend) get(w http.ResponseWriter, r *http.Request) {
	if sb, ok := f.sandbox(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, wire(sb))
	}
}

func (f *backend) delete(w http.ResponseWriter, r *http.Request) {
	ok, err := f.s.DeleteSandbox(r.Context(), r.PathValue("id"))
	switch {
	case err != nil:
		fakecloud.WriteError(w, http.StatusInternalServerError, "%v", err)
	case !ok:
		fakecloud.WriteError(w, http.StatusNotFound, "sandbox %q not found", r.PathValue("id"))
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (f *backend) proc(w http.ResponseWriter, r *http.Request) (*fakecloud.Proc, bool) {
	sb, ok := f.sandbox(w, r)
	if !ok {
		return nil, false
	}
	pid, err := strconv.Atoi(r.PathValue("pid"))
	p, ok := sb.Proc(pid)
	if err != nil || !ok {
		fakecloud.WriteError(w, http.StatusNotFound, "process %q not found", r.PathValue("pid"))
		return nil, false
	}
	return p, true
}

func (f *backend) process(w http.ResponseWriter, r *http.Request) {
	p, ok := f.proc(w, r)
	if !ok {
		return
	}
	st := refcloud.ProcessStatus{PID: p.PID(), Running: !p.Exited()}
	if !st.Running {
		code := p.ExitCode()
		st.ExitCode = &code
	}
	fakecloud.WriteJSON(w, http.StatusOK, st)
}

func (f *backend) signal(w http.ResponseWriter, r *http.Request) {
	p, ok := f.proc(w, r)
	if !ok {
		return
	}
	var req refcloud.SignalRequest
	if err := fakecloud.DecodeJSON(r, &req); err != nil || req.Signal <= 0 || req.Signal > 64 {
		fakecloud.WriteError(w, http.StatusBadRequest, "bad signal request")
		return
	}
	if err := p.Signal(syscall.Signal(req.Signal)); err != nil {
		fakecloud.WriteError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// exec runs one command over a WebSocket (the protocol's steps 1–4).
func (f *backend) exec(w http.ResponseWriter, r *http.Request) {
	sb, ok := f.sandbox(w, r)
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
	send := func(m refcloud.Message) error {
		b, _ := json.Marshal(m)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
	typ, data, err := conn.Read(hctx)
	hcancel()
	var start refcloud.Message
	if err != nil || typ != websocket.MessageText || json.Unmarshal(data, &start) != nil || start.Type != "start" {
		_ = send(refcloud.Message{Type: "error", Status: http.StatusBadRequest, Message: "the first message must be a start message"})
		return
	}
	p, err := sb.Start(fakecloud.Spec{Argv: start.Argv, Env: start.Env, Dir: start.Dir, Stdin: start.Stdin})
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, fakecloud.ErrSandboxGone) {
			status = http.StatusNotFound
		}
		_ = send(refcloud.Message{Type: "error", Status: status, Message: err.Error()})
		return
	}
	defer p.Release()
	if err := send(refcloud.Message{Type: "started", PID: p.PID()}); err != nil {
		p.Disconnected()
		return
	}

	var (
		gone    atomic.Bool // the connection is gone (dropped by either side)
		exited  atomic.Bool // the exit message went out
		sent    atomic.Int64
		dropMu  sync.Mutex
		dropped bool
	)
	disconnect := func() {
		if exited.Load() || !gone.CompareAndSwap(false, true) {
			return
		}
		p.CloseStdin()
		p.Disconnected()
	}
	// frame sends one output frame, or drops the socket once the injected
	// fault's byte budget is spent.
	frame := func(tag byte, b []byte) {
		if gone.Load() {
			return
		}
		if drop {
			dropMu.Lock()
			room := int64(dropAfter) - sent.Load()
			if int64(len(b)) >= room {
				if room > 0 {
					_ = conn.Write(ctx, websocket.MessageBinary, append([]byte{tag}, b[:room]...))
					sent.Add(room)
				}
				if !dropped {
					dropped = true
					fakecloud.NoteDrop(faultCtx)
				}
				dropMu.Unlock()
				conn.CloseNow()
				disconnect()
				return
			}
			dropMu.Unlock()
		}
		if err := conn.Write(ctx, websocket.MessageBinary, append([]byte{tag}, b...)); err != nil {
			disconnect()
			return
		}
		sent.Add(int64(len(b)))
	}
	var outs sync.WaitGroup
	for tag, rd := range map[byte]io.Reader{refcloud.TagStdout: p.Stdout(), refcloud.TagStderr: p.Stderr()} {
		outs.Go(func() {
			buf := make([]byte, refcloud.MaxFrame)
			for {
				n, err := rd.Read(buf)
				if n > 0 {
					frame(tag, buf[:n]) // after a disconnect the output is drained and dropped
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
			switch {
			case typ == websocket.MessageBinary && len(data) > 0 && data[0] == refcloud.TagStdin:
				if _, err := p.WriteStdin(data[1:]); err != nil {
					p.CloseStdin()
				}
			case typ == websocket.MessageText:
				var m refcloud.Message
				if json.Unmarshal(data, &m) == nil && m.Type == "eof" {
					p.CloseStdin()
				}
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
	if send(refcloud.Message{Type: "exit", Code: &code}) == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}
}
