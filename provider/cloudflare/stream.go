package cloudflare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// readLimit is the largest message the client reads.
const readLimit = 1 << 20

// handshakeTimeout bounds the upgrade and the start/started exchange.
const handshakeTimeout = 30 * time.Second

// backend is execproc's Backend: one WebSocket per command.
type backend struct{ h *handle }

// Start dials the exec WebSocket, sends the start message and waits for
// the backend's answer.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	h := b.h
	// The handshake is bounded on its own: the command's context ends the
	// command through execproc's kill, not by cutting the connection.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	conn, err := h.p.c.Dial(hctx, op, "/v1/sandboxes/"+url.PathEscape(h.sb.ID)+"/exec", nil)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			return nil, sandbox.Errorf(sandbox.NotFound, op, h.sb.ID, "sandbox is gone")
		}
		return nil, err
	}
	conn.SetReadLimit(readLimit)
	fail := func(code sandbox.Code, format string, args ...any) (execproc.Stream, error) {
		conn.CloseNow()
		if ctx.Err() != nil {
			return nil, sandbox.Wrap(sandbox.Canceled, op, h.sb.ID, ctx.Err())
		}
		return nil, sandbox.Errorf(code, op, h.sb.ID, format, args...)
	}
	// A spawned command reads /dev/null: the bridge's stdin is buffered
	// until eof (the SDK's exec takes none), so it cannot be written live.
	live := strings.HasSuffix(op, ".spawn")
	start, _ := json.Marshal(Message{Type: "start", Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdin: spec.Stdin && !live})
	if err := conn.Write(hctx, websocket.MessageText, start); err != nil {
		return fail(sandbox.Unavailable, "%s: sending the start message: %v", Name, err)
	}
	typ, data, err := conn.Read(hctx)
	if err != nil {
		return fail(sandbox.Unavailable, "%s: the exec stream ended before the process started: %v", Name, err)
	}
	var m Message
	if typ != websocket.MessageText || json.Unmarshal(data, &m) != nil {
		return fail(sandbox.Internal, "%s: the first exec message is not JSON", Name)
	}
	switch m.Type {
	case "started":
	case "error":
		return fail(cloudhttp.CodeForStatus(m.Status), "%s could not start the command (%d): %s", Name, m.Status, m.Message)
	default:
		return fail(sandbox.Internal, "%s: unexpected first exec message %q", Name, m.Type)
	}
	sctx, scancel := context.WithCancel(context.Background())
	return &stream{h: h, op: op, conn: conn, live: live, ctx: sctx, cancel: scancel}, nil
}

// stream is one command's WebSocket. Stdin frames and the eof message
// are sent as they come; the bridge buffers them (up to MaxStdin) and runs
// the command with that input once eof arrives.
type stream struct {
	h      *handle
	op     string
	conn   *websocket.Conn
	live   bool // a spawned command: no stdin
	ctx    context.Context
	cancel context.CancelFunc

	wmu      sync.Mutex // one stdin message at a time (frames in order)
	closed   atomic.Bool
	received atomic.Int64
	exit     atomic.Pointer[int]
	once     sync.Once
}

// Copy reads the output frames until the exit message.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	for {
		typ, data, err := s.conn.Read(s.ctx)
		if err != nil {
			if s.closed.Load() {
				return nil
			}
			return fmt.Errorf("the exec stream dropped after %d bytes of output, before its exit code arrived: %w",
				s.received.Load(), err)
		}
		switch typ {
		case websocket.MessageBinary:
			if len(data) == 0 {
				continue
			}
			w := stdout
			switch data[0] {
			case TagStdout:
			case TagStderr:
				w = stderr
			default:
				continue
			}
			s.received.Add(int64(len(data) - 1))
			if _, err := w.Write(data[1:]); err != nil {
				return err
			}
		case websocket.MessageText:
			var m Message
			if json.Unmarshal(data, &m) == nil && m.Type == "exit" && m.Code != nil {
				code := *m.Code
				s.exit.Store(&code)
				return nil
			}
		}
	}
}

// Write sends stdin frames.
func (s *stream) Write(p []byte) (int, error) {
	if s.live {
		return 0, sandbox.Unsupported(Name, "writableStdin")
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), MaxFrame)]
		msg := append([]byte{TagStdin}, chunk...)
		if err := s.conn.Write(s.ctx, websocket.MessageBinary, msg); err != nil {
			return n, err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// CloseStdin sends the EOF message.
func (s *stream) CloseStdin() error {
	if s.live {
		return sandbox.Unsupported(Name, "writableStdin")
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	msg, _ := json.Marshal(Message{Type: "eof"})
	return s.conn.Write(s.ctx, websocket.MessageText, msg)
}

// Exit returns the code the exit message carried. A stream that ended
// without one (it dropped, or was abandoned after a kill) has no exit code
// to ask for: the bridge keeps no process table (the SDK's exec is not a
// background process), so it is Unavailable.
func (s *stream) Exit(ctx context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.sb.ID,
		"the exec stream ended before the command's exit code arrived")
}

// Close abandons the stream (the command runs on).
func (s *stream) Close() error {
	s.once.Do(func() {
		s.closed.Store(s.exit.Load() == nil)
		s.cancel()
		_ = s.conn.CloseNow()
	})
	return nil
}
