package railway

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// Exec socket frames (the SDK's exec-ws-client): binary 1 stdout, 3
// stderr; text init_exec, stdin_close, signal, exit, durable_session.
const (
	tagStdout = 1
	tagStderr = 3
	// maxStdin bounds the stdin an Exec may carry (it is uploaded first).
	maxStdin = 64 << 20
	// maxInlineStdin is the most stdin carried in the command text (at
	// most four bytes of text each: under the kernel's 128 KiB for one
	// argument).
	maxInlineStdin = 16 << 10
	// handshakeTimeout bounds the token, the upgrade and the init frame.
	handshakeTimeout = 30 * time.Second
)

// token mints a shell token for the sandbox with scope ("shell", or
// "files:read files:write").
func (h *handle) token(ctx context.Context, op, scope string) (string, error) {
	var ans struct {
		Token string `json:"generateShellToken"`
	}
	in := map[string]any{"environmentId": h.p.env(), "instanceId": h.id, "kind": "sandbox", "scope": scope}
	if err := h.p.gql(ctx, op, h.id, mShellToken, map[string]any{"input": in}, true, &ans); err != nil {
		return "", err
	}
	return ans.Token, nil
}

// dial opens a tcp-proxy socket with a fresh token.
func (h *handle) dial(ctx context.Context, op, path, scope string) (*websocket.Conn, error) {
	tok, err := h.token(ctx, op, scope)
	if err != nil {
		return nil, err
	}
	conn, err := h.p.ws.Dial(ctx, op, path, &websocket.DialOptions{Subprotocols: []string{"railway-shell", tok}})
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			return nil, sandbox.Errorf(sandbox.NotFound, op, h.id, "railway sandbox %s is gone", h.id)
		}
		return nil, err
	}
	conn.SetReadLimit(8 << 20)
	return conn, nil
}

// backend is execproc's Backend: one exec socket per command.
type backend struct{ h *handle }

// command is the init frame's command: argv quoted for the sandbox's
// shell and exec'd, so the wrapper's pid leads the session's group.
func command(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = sandbox.ShellQuote(a)
	}
	return "exec " + strings.Join(q, " ")
}

// Start dials the exec socket and sends init_exec. A command with stdin
// starts when its stdin is closed: the bytes are uploaded to a file over
// the files socket first and the command reads it (the SDK's protocol has
// no stdin data frame).
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	s := &stream{h: b.h, op: op, spec: spec, ready: make(chan struct{})}
	if spec.Stdin && !strings.HasSuffix(op, ".spawn") { // a spawned process's stdin is not writable
		s.pending = true
		return s, nil
	}
	if err := s.launch(ctx, "", nil); err != nil {
		return nil, err
	}
	return s, nil
}

// stream is one command's exec socket.
type stream struct {
	h    *handle
	op   string
	spec execproc.Spec

	pending bool // waiting for stdin
	stdin   bytes.Buffer
	ready   chan struct{}
	rmu     sync.Mutex
	isReady bool
	err     error // launch error, valid after ready

	conn     *websocket.Conn
	ctx      context.Context
	cancel   context.CancelFunc
	wmu      sync.Mutex
	closed   atomic.Bool
	received atomic.Int64
	// reattached counts the reattaches after a dropped socket.
	reattached atomic.Int64
	exit       atomic.Pointer[int]
	once       sync.Once
}

func (s *stream) launch(ctx context.Context, stdinFile string, inline []byte) error {
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	conn, err := s.h.dial(hctx, s.op, s.h.p.execWS, "shell")
	if err != nil {
		if ctx.Err() != nil {
			return sandbox.Wrap(sandbox.Canceled, s.op, s.h.id, ctx.Err())
		}
		return err
	}
	cmd := command(s.spec.Argv)
	if stdinFile != "" {
		f := sandbox.ShellQuote(stdinFile)
		if inline != nil {
			cmd = "(umask 077; printf '" + printfEscape(inline) + "' >" + f + ") || exit 125; " + "exec 0<" + f + "; rm -f " + f + "; " + cmd
		} else {
			cmd = "exec 0<" + f + "; rm -f " + f + "; " + cmd
		}
	}
	data := map[string]any{"command": cmd}
	if s.spec.Dir != "" {
		data["cwd"] = s.spec.Dir
	}
	if len(s.spec.Env) > 0 {
		env := map[string]string{}
		for _, kv := range s.spec.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		data["env"] = env
	}
	init, _ := json.Marshal(map[string]any{"type": "init_exec", "data": data})
	if err := conn.Write(hctx, websocket.MessageText, init); err != nil {
		conn.CloseNow()
		return sandbox.Errorf(sandbox.Unavailable, s.op, s.h.id, "railway: the exec socket closed before init: %v", err)
	}
	_ = conn.Write(hctx, websocket.MessageText, []byte(`{"type":"stdin_close"}`))
	s.rmu.Lock()
	s.conn = conn
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.rmu.Unlock()
	return nil
}

// maxReattach bounds the reattaches of one command's stream.
const maxReattach = 5

// Copy reads the output frames until the exit message. When the socket
// drops first, the command runs on in its durable session (Railway keeps
// it after its client leaves): Copy reattaches by the session's name,
// which replays the retained output from the start, skips what it had
// already delivered of each stream, and reads on.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	if s.pending {
		<-s.ready
		if s.err != nil {
			return s.err
		}
	}
	var got [2]int64 // bytes delivered of stdout, stderr
	var skip [2]int64
	session := ""
	s.rmu.Lock()
	conn := s.conn
	s.rmu.Unlock()
	for attempt := 0; ; {
		typ, data, err := conn.Read(s.ctx)
		if err != nil {
			if s.closed.Load() {
				return nil
			}
			if session == "" || attempt >= maxReattach {
				return fmt.Errorf("the railway exec socket dropped after %d bytes of output, before the command reported an exit: %w", s.received.Load(), err)
			}
			attempt++
			next, rerr := s.reattach(session)
			if rerr != nil && s.closed.Load() { // abandoned meanwhile
				return nil
			}
			if rerr != nil {
				return fmt.Errorf("the railway exec socket dropped after %d bytes of output and reattaching to session %s failed (%v): %w", s.received.Load(), session, rerr, err)
			}
			s.h.p.log.Debug("railway exec socket reattached", "sandbox", s.h.id, "session", session, "attempt", attempt)
			s.reattached.Add(1)
			conn = next
			skip = got
			continue
		}
		switch typ {
		case websocket.MessageBinary:
			if len(data) < 1 {
				continue
			}
			w, i := stdout, 0
			switch data[0] {
			case tagStdout:
			case tagStderr:
				w, i = stderr, 1
			default:
				continue
			}
			body := data[1:]
			if n := min(skip[i], int64(len(body))); n > 0 { // replayed: already delivered
				skip[i] -= n
				body = body[n:]
			}
			if len(body) == 0 {
				continue
			}
			got[i] += int64(len(body))
			s.received.Add(int64(len(body)))
			if _, err := w.Write(body); err != nil {
				return err
			}
		case websocket.MessageText:
			var m struct {
				Type string `json:"type"`
				Data struct {
					ExitCode           int    `json:"exit_code"`
					DurableSessionName string `json:"durable_session_name"`
				} `json:"data"`
			}
			if json.Unmarshal(data, &m) != nil {
				continue
			}
			switch m.Type {
			case "durable_session":
				session = m.Data.DurableSessionName
			case "exit":
				code := m.Data.ExitCode
				if code < 0 { // a signalled process reports -1; the signal is not said
					code = 128 + 9
				}
				s.exit.Store(&code)
				return nil
			}
		}
	}
}

// reattach opens a new exec socket on the command's durable session (the
// SDK's reattach: placeholder command ":", durable_session_name, the
// retained output replayed from the start) and makes it the stream's.
func (s *stream) reattach(session string) (*websocket.Conn, error) {
	hctx, cancel := context.WithTimeout(s.ctx, handshakeTimeout)
	defer cancel()
	conn, err := s.h.dial(hctx, s.op, s.h.p.execWS, "shell")
	if err != nil {
		return nil, err
	}
	init, _ := json.Marshal(map[string]any{"type": "init_exec", "data": map[string]any{"command": ":", "durable_session_name": session}})
	if err := conn.Write(hctx, websocket.MessageText, init); err != nil {
		conn.CloseNow()
		return nil, err
	}
	s.rmu.Lock()
	old := s.conn
	s.conn = conn
	closed := s.closed.Load()
	s.rmu.Unlock()
	_ = old.CloseNow()
	if closed {
		_ = conn.CloseNow()
	}
	return conn, nil
}

// Write buffers stdin until CloseStdin (an Exec's stdin only: spawned
// processes have no writable stdin).
func (s *stream) Write(p []byte) (int, error) {
	if !s.pending {
		return 0, sandbox.Unsupported(Name, "writableStdin")
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.stdin.Len()+len(p) > maxStdin {
		return 0, sandbox.Errorf(sandbox.ResourceExhausted, s.op, s.h.id, "railway: stdin over %d bytes", maxStdin)
	}
	return s.stdin.Write(p)
}

// CloseStdin uploads the buffered stdin and starts the command.
func (s *stream) CloseStdin() error {
	if !s.pending {
		return nil
	}
	s.wmu.Lock()
	data := s.stdin.Bytes()
	s.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	file := "/tmp/.corral-stdin-" + randomHex(8)
	var err error
	if len(data) <= maxInlineStdin {
		// Small stdin rides in the command itself (printf's octal
		// escapes, a shell builtin): no files socket, one round trip.
		err = s.launch(ctx, file, append([]byte{}, data...))
	} else if err = s.h.upload(ctx, s.op, file, data); err == nil {
		err = s.launch(ctx, file, nil)
	}
	s.setReady(err)
	return err
}

// setReady ends the wait for stdin once, with err as the launch's result.
func (s *stream) setReady(err error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.isReady {
		return
	}
	s.isReady = true
	s.err = err
	close(s.ready)
}

// Exit returns the code the exit message carried.
func (s *stream) Exit(context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.id, "the railway exec socket ended before the command reported an exit (its outcome is unknown)")
}

// Close abandons the stream; the command runs on (Railway keeps a
// durable session after its client leaves).
func (s *stream) Close() error {
	s.once.Do(func() {
		if s.pending {
			s.setReady(sandbox.Errorf(sandbox.Canceled, s.op, s.h.id, "closed before stdin was closed"))
		}
		s.rmu.Lock()
		conn := s.conn
		s.rmu.Unlock()
		if conn == nil {
			return
		}
		s.closed.Store(s.exit.Load() == nil)
		s.cancel()
		s.rmu.Lock()
		conn = s.conn
		s.rmu.Unlock()
		_ = conn.CloseNow()
	})
	return nil
}

// upload writes data to path over the files socket (write_start,
// write_ready, 64 KiB chunk frames, the end frame, ok).
func (h *handle) upload(ctx context.Context, op, path string, data []byte) error {
	conn, err := h.dial(ctx, op, h.p.filesWS, "files:read files:write")
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	start, _ := json.Marshal(map[string]any{"type": "write_start", "id": "1", "data": map[string]any{"path": path, "mode": 0o600, "size": len(data)}})
	if err := conn.Write(ctx, websocket.MessageText, start); err != nil {
		return sandbox.Errorf(sandbox.Unavailable, op, h.id, "railway files socket: %v", err)
	}
	wait := func(want string) error {
		for {
			typ, msg, err := conn.Read(ctx)
			if err != nil {
				return sandbox.Errorf(sandbox.Unavailable, op, h.id, "railway files socket dropped: %v", err)
			}
			if typ != websocket.MessageText {
				continue
			}
			var m struct {
				Type string `json:"type"`
				Data struct {
					Message string `json:"message"`
				} `json:"data"`
			}
			if json.Unmarshal(msg, &m) != nil {
				continue
			}
			if m.Type == "error" {
				return sandbox.Errorf(sandbox.Internal, op, h.id, "railway files: %s", m.Data.Message)
			}
			if m.Type == want {
				return nil
			}
		}
	}
	if err := wait("write_ready"); err != nil {
		return err
	}
	var seq uint32
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), 64<<10)
		typ := uint16(3)
		if n == len(data) {
			typ = 4
		}
		fr := make([]byte, 12+n)
		binary.BigEndian.PutUint16(fr[0:], 1)
		binary.BigEndian.PutUint16(fr[2:], typ)
		binary.BigEndian.PutUint32(fr[4:], seq)
		binary.BigEndian.PutUint32(fr[8:], uint32(n))
		copy(fr[12:], data[:n])
		if err := conn.Write(ctx, websocket.MessageBinary, fr); err != nil {
			return sandbox.Errorf(sandbox.Unavailable, op, h.id, "railway files socket: %v", err)
		}
		seq++
		data = data[n:]
	}
	return wait("ok")
}

// heartbeat runs one no-op command ("true") on its own exec socket: the
// activity resets the sandbox's idle clock.
func (h *handle) heartbeat(ctx context.Context) error {
	_, _, err := h.bare(ctx, Name+".heartbeat", "true")
	return err
}

// bare runs one shell command on its own exec socket, outside execproc
// (no wrapper, no kill), and returns its stdout (at most 64 KiB kept) and
// exit code.
func (h *handle) bare(ctx context.Context, op, command string) ([]byte, int, error) {
	conn, err := h.dial(ctx, op, h.p.execWS, "shell")
	if err != nil {
		return nil, -1, err
	}
	defer conn.CloseNow()
	init, _ := json.Marshal(map[string]any{"type": "init_exec", "data": map[string]any{"command": command}})
	if err := conn.Write(ctx, websocket.MessageText, init); err != nil {
		return nil, -1, sandbox.Errorf(sandbox.Unavailable, op, h.id, "railway exec socket: %v", err)
	}
	_ = conn.Write(ctx, websocket.MessageText, []byte(`{"type":"stdin_close"}`))
	var out []byte
	for {
		typ, data, err := conn.Read(ctx)
		if err != nil {
			return out, -1, sandbox.Errorf(sandbox.Unavailable, op, h.id, "the railway exec socket dropped before the command reported an exit: %v", err)
		}
		if typ == websocket.MessageBinary {
			if len(data) > 0 && data[0] == tagStdout && len(out) < 64<<10 {
				out = append(out, data[1:]...)
			}
			continue
		}
		var m struct {
			Type string `json:"type"`
			Data struct {
				ExitCode int `json:"exit_code"`
			} `json:"data"`
		}
		if json.Unmarshal(data, &m) == nil && m.Type == "exit" {
			return out, m.Data.ExitCode, nil
		}
	}
}

// printfEscape writes data as a printf format for single quotes: letters,
// digits and a few safe marks as themselves, every other byte an octal
// escape (so no quote, backslash, percent or NUL is ever literal).
func printfEscape(data []byte) string {
	var b strings.Builder
	b.Grow(len(data) * 2)
	for _, c := range data {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(" .,:;/_-+=@#", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "\\%03o", c)
	}
	return b.String()
}
