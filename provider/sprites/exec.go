package sprites

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// readLimit is the largest message the client reads.
const readLimit = 4 << 20

// maxFrame is the largest stdin payload one frame carries.
const maxFrame = 32 << 10

// handshakeTimeout bounds the upgrade and the session_info message.
const handshakeTimeout = 30 * time.Second

// backend is execproc's Backend: one exec WebSocket per command.
type backend struct{ h *handle }

// execPath builds the exec URL's path and query: argv as repeated cmd,
// the directory, stdin only when asked for, and env= — which replaces the
// Sprite's default environment, so the overlay is laid over the default
// environment read when the handle was opened. A spawned command runs on
// after a disconnect (max_run_after_disconnect=0: a durable run outlives
// the corral process that started it); an exec keeps Sprites' default.
func (h *handle) execPath(op string, spec execproc.Spec) string {
	q := url.Values{}
	for _, a := range spec.Argv {
		q.Add("cmd", a)
	}
	q.Set("path", spec.Argv[0])
	if spec.Dir != "" {
		q.Set("dir", spec.Dir)
	}
	q.Set("stdin", strconv.FormatBool(spec.Stdin))
	if strings.HasSuffix(op, ".spawn") {
		q.Set("max_run_after_disconnect", "0")
	}
	if len(spec.Env) > 0 {
		env := map[string]string{}
		for k, v := range h.base {
			env[k] = v
		}
		for _, kv := range spec.Env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			q.Add("env", k+"="+env[k])
		}
	}
	return "/v1/sprites/" + url.PathEscape(h.sp.Name) + "/exec?" + q.Encode()
}

// Start dials the exec WebSocket and waits for session_info.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	h := b.h
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	conn, err := h.p.c.Dial(hctx, op, h.execPath(op, spec), nil)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			return nil, sandbox.Errorf(sandbox.NotFound, op, h.sp.Name, "sprite %s is gone", h.sp.Name)
		}
		return nil, err
	}
	conn.SetReadLimit(readLimit)
	s := &stream{h: h, op: op}
	for s.session == 0 {
		typ, data, err := conn.Read(hctx)
		if err != nil {
			conn.CloseNow()
			if ctx.Err() != nil {
				return nil, sandbox.Wrap(sandbox.Canceled, op, h.sp.Name, ctx.Err())
			}
			return nil, sandbox.Errorf(sandbox.Unavailable, op, h.sp.Name, "sprites: the exec stream ended before session_info: %v", err)
		}
		if typ == websocket.MessageBinary {
			s.early = append(s.early, data) // output before session_info, kept in order
			continue
		}
		var m struct {
			Type      string `json:"type"`
			SessionID int    `json:"session_id"`
		}
		if json.Unmarshal(data, &m) == nil && m.Type == "session_info" {
			s.session = m.SessionID
			if s.session == 0 {
				s.session = -1
			}
		}
	}
	s.conn = conn
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// stream is one command's exec WebSocket.
type stream struct {
	h       *handle
	op      string
	conn    *websocket.Conn
	session int // session_id: the process's pid in the Sprite
	early   [][]byte
	ctx     context.Context
	cancel  context.CancelFunc

	wmu      sync.Mutex
	closed   atomic.Bool
	received atomic.Int64
	exit     atomic.Pointer[int]
	once     sync.Once
}

// frame handles one binary message; it reports whether it was the exit.
func (s *stream) frame(data []byte, stdout, stderr io.Writer) (bool, error) {
	if len(data) == 0 {
		return false, nil
	}
	switch data[0] {
	case tagStdout, tagStderr:
		w := stdout
		if data[0] == tagStderr {
			w = stderr
		}
		s.received.Add(int64(len(data) - 1))
		_, err := w.Write(data[1:])
		return false, err
	case tagExit:
		code := 0
		if len(data) > 1 {
			code = int(data[1])
		}
		s.exit.Store(&code)
		return true, nil
	}
	return false, nil
}

// Copy reads the output frames until the exit frame (binary 0x03, or the
// JSON exit message).
func (s *stream) Copy(stdout, stderr io.Writer) error {
	for _, d := range s.early {
		if done, err := s.frame(d, stdout, stderr); done || err != nil {
			return err
		}
	}
	s.early = nil
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			if s.closed.Load() {
				return nil
			}
			return fmt.Errorf("the exec stream of sprites session %d dropped after %d bytes of output, before its exit code arrived: %w",
				s.session, s.received.Load(), err)
		}
		switch typ {
		case websocket.MessageBinary:
			if done, err := s.frame(data, stdout, stderr); done || err != nil {
				return err
			}
		case websocket.MessageText:
			var m struct {
				Type     string `json:"type"`
				ExitCode int    `json:"exit_code"`
			}
			if json.Unmarshal(data, &m) == nil && m.Type == "exit" {
				code := m.ExitCode
				s.exit.Store(&code)
				return nil
			}
		}
	}
}

// Write sends stdin frames (the exec was opened with stdin=true).
func (s *stream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), maxFrame)]
		if err := s.conn.Write(s.ctx, websocket.MessageBinary, append([]byte{tagStdin}, chunk...)); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// CloseStdin sends the stdin EOF frame.
func (s *stream) CloseStdin() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.conn.Write(s.ctx, websocket.MessageBinary, []byte{tagStdinEOF})
}

// Exit returns the code the exit frame carried.
func (s *stream) Exit(context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.sp.Name,
		"the exec stream of sprites session %d ended before its exit code (the command may still run: kill it with the session's kill endpoint)", s.session)
}

// Close abandons the stream; a spawned command runs on (Sprites keeps a
// session after its client leaves).
func (s *stream) Close() error {
	s.once.Do(func() {
		s.closed.Store(s.exit.Load() == nil)
		s.cancel()
		_ = s.conn.CloseNow()
	})
	return nil
}

// signalNames are the names the kill endpoint takes.
var signalNames = map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGKILL: "SIGKILL", syscall.SIGINT: "SIGINT",
	syscall.SIGHUP: "SIGHUP", syscall.SIGQUIT: "SIGQUIT", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGSTOP: "SIGSTOP", syscall.SIGCONT: "SIGCONT"}

// kill is the Runner's kill strategy: Sprites' kill endpoint for the
// session (whose id is the pid the wrapper reported: the wrapper execs the
// command, so the session's process is the command). It signals the
// process group and, after the timeout (the grace), sends SIGKILL; its
// NDJSON stream ends when the group is gone. A session that is gone is
// success.
func (h *handle) kill(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
	op := Name + ".kill"
	name, ok := signalNames[sig]
	if !ok {
		name = strconv.Itoa(int(sig))
	}
	q := url.Values{"signal": {name}, "timeout": {grace.String()}}
	resp, err := h.p.c.Stream(ctx, cloudhttp.Request{Op: op, ID: h.sp.Name, Method: http.MethodPost,
		Path: "/v1/sprites/" + url.PathEscape(h.sp.Name) + "/exec/" + strconv.Itoa(pid) + "/kill", Query: q, Idempotent: true})
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var m StreamMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Type == "error" {
			return sandbox.Errorf(sandbox.Internal, op, h.sp.Name, "sprites could not kill session %d: %s%s", pid, m.Message, m.Error)
		}
	}
	if err := sc.Err(); err != nil {
		return sandbox.Errorf(sandbox.Unavailable, op, h.sp.Name, "the kill stream of session %d dropped: %v", pid, err)
	}
	return nil
}
