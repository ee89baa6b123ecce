package railwayfake

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"syscall"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Frame tags of the exec socket's binary messages (the SDK's
// exec-ws-client: 1 stdout, 3 stderr).
const (
	tagStdout = 1
	tagStderr = 3
)

// logCap bounds the output a durable session retains for reattach (the
// fake keeps more than it needs: corral's suites stream 24 MiB).
const logCap = 64 << 20

// session is one exec: a process whose output is retained so that a
// client may reattach by durable_session_name after its connection
// dropped (the process runs on).
type session struct {
	name string
	proc *fakecloud.Proc

	mu     sync.Mutex
	frames [][]byte
	size   int
	read   int // frames delivered to some client (resume_from_last_read)
	ended  bool
	change chan struct{}
}

func (s *session) add(fr []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.size+len(fr) <= logCap {
		s.frames = append(s.frames, fr)
		s.size += len(fr)
	}
	close(s.change)
	s.change = make(chan struct{})
}

func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	close(s.change)
	s.change = make(chan struct{})
}

// accept upgrades an exec or files connection: the shell token rides as
// the second offered subprotocol, "railway-shell" is the one chosen.
func (f *Fake) accept(w http.ResponseWriter, r *http.Request, wantScope string) (*websocket.Conn, shellToken, bool) {
	var tok string
	for _, p := range strings.Split(r.Header.Get("Sec-WebSocket-Protocol"), ",") {
		if p = strings.TrimSpace(p); p != "" && p != "railway-shell" {
			tok = p
		}
	}
	f.mu.Lock()
	st, ok := f.tokens[tok]
	_, alive := f.boxes[st.sandbox]
	f.mu.Unlock()
	if !ok {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return nil, st, false
	}
	if !alive {
		http.Error(w, "instance not found", http.StatusNotFound)
		return nil, st, false
	}
	if wantScope != "" && !strings.Contains(st.scope, wantScope) {
		http.Error(w, "token scope does not allow "+wantScope, http.StatusForbidden)
		return nil, st, false
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{"railway-shell"}})
	if err != nil {
		return nil, st, false
	}
	c.SetReadLimit(fakecloud.WebSocketReadLimit)
	f.mu.Lock()
	if b, ok := f.boxes[st.sandbox]; ok {
		b.live++
		b.active = f.opts.Now()
	}
	f.mu.Unlock()
	return c, st, true
}

func (f *Fake) release(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok {
		b.live--
		b.active = f.opts.Now()
	}
}

type initExec struct {
	Type string `json:"type"`
	Data struct {
		Command            string            `json:"command"`
		Cwd                string            `json:"cwd"`
		Env                map[string]string `json:"env"`
		DurableSessionName string            `json:"durable_session_name"`
		ResumeFromLastRead bool              `json:"resume_from_last_read"`
	} `json:"data"`
}

// signals are the names the exec socket's signal frame takes.
var signals = map[string]syscall.Signal{"TERM": syscall.SIGTERM, "KILL": syscall.SIGKILL, "INT": syscall.SIGINT,
	"HUP": syscall.SIGHUP, "QUIT": syscall.SIGQUIT}

func (f *Fake) execWS(w http.ResponseWriter, r *http.Request) {
	dropAfter, drop := fakecloud.StreamFault(r.Context())
	c, st, ok := f.accept(w, r, "")
	if !ok {
		return
	}
	release := sync.OnceFunc(func() { f.release(st.sandbox) })
	defer release()
	defer c.CloseNow()
	ctx := r.Context()
	_, data, err := c.Read(ctx)
	if err != nil {
		return
	}
	var in initExec
	if json.Unmarshal(data, &in) != nil || in.Type != "init_exec" {
		_ = c.Close(websocket.StatusPolicyViolation, "expected init_exec")
		return
	}
	f.mu.Lock()
	b, alive := f.boxes[st.sandbox]
	var sess *session
	if alive && in.Data.DurableSessionName != "" {
		sess = b.sessions[in.Data.DurableSessionName]
	}
	if in.Data.Command == "true" {
		f.heartbeats++
	}
	f.mu.Unlock()
	if !alive {
		_ = c.Close(websocket.StatusGoingAway, "instance not found")
		return
	}
	from := 0
	if sess == nil {
		if in.Data.DurableSessionName != "" && in.Data.Command == ":" {
			_ = c.Close(websocket.StatusPolicyViolation, "durable session not found")
			return
		}
		// The sandbox's create-time variables are every command's
		// environment; the init frame's env overrides them.
		env := make([]string, 0, len(b.vars)+len(in.Data.Env))
		f.mu.Lock()
		for k, v := range b.vars {
			env = append(env, k+"="+v)
		}
		f.mu.Unlock()
		for k, v := range in.Data.Env {
			env = append(env, k+"="+v)
		}
		p, err := b.sb.Start(fakecloud.Spec{Argv: []string{"/bin/sh", "-c", in.Data.Command}, Env: env, Dir: in.Data.Cwd, Stdin: true})
		if err != nil {
			_ = c.Write(ctx, websocket.MessageBinary, append([]byte{tagStderr}, []byte(err.Error()+"\n")...))
			_ = c.Write(ctx, websocket.MessageText, mustJSON(map[string]any{"type": "exit", "data": map[string]any{"exit_code": 127}}))
			_ = c.Close(websocket.StatusNormalClosure, "")
			return
		}
		sess = &session{name: "sess-" + newUUID()[:8], proc: p, change: make(chan struct{})}
		f.mu.Lock()
		b.sessions[sess.name] = sess
		f.mu.Unlock()
		var wg sync.WaitGroup
		for _, pipe := range []struct {
			tag byte
			r   interface{ Read([]byte) (int, error) }
		}{{tagStdout, p.Stdout()}, {tagStderr, p.Stderr()}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 32<<10)
				for {
					n, err := pipe.r.Read(buf)
					if n > 0 {
						sess.add(append([]byte{pipe.tag}, buf[:n]...))
					}
					if err != nil {
						return
					}
				}
			}()
		}
		go func() {
			wg.Wait()
			<-p.Done()
			p.Release()
			sess.end()
		}()
	} else if in.Data.ResumeFromLastRead {
		sess.mu.Lock()
		from = sess.read
		sess.mu.Unlock()
	}
	_ = c.Write(ctx, websocket.MessageText, mustJSON(map[string]any{"type": "durable_session", "data": map[string]any{"durable_session_name": sess.name}}))

	// Client frames: stdin_close, signal. A dropped connection leaves the
	// session running.
	go func() {
		for {
			_, data, err := c.Read(ctx)
			if err != nil {
				return
			}
			f.touch(st.sandbox)
			var m struct {
				Type string `json:"type"`
				Data struct {
					Signal string `json:"signal"`
				} `json:"data"`
			}
			if json.Unmarshal(data, &m) != nil {
				continue
			}
			switch m.Type {
			case "stdin_close":
				sess.proc.CloseStdin()
			case "signal":
				sig, ok := signals[strings.TrimPrefix(strings.ToUpper(m.Data.Signal), "SIG")]
				if !ok {
					sig = syscall.SIGKILL
				}
				_ = sess.proc.Signal(sig)
			}
		}
	}()
	sent := 0
	for i := from; ; {
		sess.mu.Lock()
		frames, ended, change := sess.frames, sess.ended, sess.change
		sess.mu.Unlock()
		for ; i < len(frames); i++ {
			fr := frames[i]
			if drop && sent+len(fr)-1 > dropAfter {
				fakecloud.NoteDrop(ctx)
				return
			}
			if err := c.Write(ctx, websocket.MessageBinary, fr); err != nil {
				return
			}
			sent += len(fr) - 1
			sess.mu.Lock()
			if i+1 > sess.read {
				sess.read = i + 1
			}
			sess.mu.Unlock()
		}
		if ended && i >= len(frames) {
			break
		}
		select {
		case <-change:
		case <-ctx.Done():
			return
		}
	}
	code := sess.proc.ExitCode()
	reason := ""
	if code > 128 && code <= 128+64 { // a signalled process reports -1 (fakecloud says 128+N)
		code, reason = -1, "signal"
	}
	release() // the client is done with the sandbox once it has the exit
	_ = c.Write(ctx, websocket.MessageText, mustJSON(map[string]any{"type": "exit", "data": map[string]any{"exit_code": code, "reason": reason}}))
	_ = c.Close(websocket.StatusNormalClosure, "")
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
