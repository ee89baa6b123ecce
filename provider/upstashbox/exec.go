package upstashbox

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// stdinChunk is the most stdin one frame carries (base64 grows it by a
// third; servers read frames of up to 1 MiB).
const stdinChunk = 256 << 10

// backend is execproc's Backend over Upstash Box. Exec and the file
// system run over the exec session WebSocket (stdin, half-close, separate
// streams); it dies with its socket, which is what an Exec wants. A
// spawned command must outlive the socket (a run's journal wrapper must
// outlive the corral process that started it), so Spawn starts it
// detached through the HTTP exec and follows its output files over a
// session that may drop and be dialled again (spawn.go).
type backend struct{ h *handle }

// Start starts spec.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	if strings.HasSuffix(op, ".spawn") {
		return b.h.spawnDetached(ctx, op, spec)
	}
	d, err := b.h.startExec(ctx, op, spec)
	if err != nil {
		return nil, err
	}
	if !spec.Stdin {
		// A session's command has a stdin; without one it reads EOF at once.
		if err := d.CloseStdin(); err != nil {
			_ = d.Close()
			return nil, err
		}
	}
	return d, nil
}

// wsStream is one command over the exec session WebSocket.
type wsStream struct {
	h      *handle
	op     string
	conn   *websocket.Conn
	pid    int
	wmu    sync.Mutex
	closed atomic.Bool
	code   atomic.Pointer[int]
	got    atomic.Int64
	raw    bytes.Buffer // the frame being read (Copy's goroutine only)
	dec    []byte       // its decoded data
}

// session dials the exec session, sends start and waits for started.
func (h *handle) session(ctx context.Context, op string, start Frame) (*wsStream, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := h.p.c.Dial(dctx, op, "/v2/box/"+url.PathEscape(h.b.ID)+SessionPath, nil)
	if err != nil {
		return nil, goneErr(op, h.b.ID, err)
	}
	conn.SetReadLimit(4 << 20)
	s := &wsStream{h: h, op: op, conn: conn}
	if err := s.send(dctx, start); err != nil {
		conn.CloseNow()
		return nil, sandbox.Wrap(sandbox.Unavailable, op, h.b.ID, err)
	}
	m, err := s.read(dctx)
	if err != nil {
		conn.CloseNow()
		return nil, sandbox.Errorf(sandbox.Unavailable, op, h.b.ID, "the exec session ended before the command started: %v", err)
	}
	switch m.Type {
	case "started":
		s.pid = m.PID
		return s, nil
	case "error":
		conn.CloseNow()
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, h.b.ID, "upstash box refused the command: %s", m.Message)
	}
	conn.CloseNow()
	return nil, sandbox.Errorf(sandbox.Internal, op, h.b.ID, "unexpected %q frame before started", m.Type)
}

func goneErr(op, id string, err error) error {
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return sandbox.Errorf(sandbox.NotFound, op, id, "upstash box %s is gone", id)
	}
	return err
}

func (s *wsStream) send(ctx context.Context, m Frame) error {
	data, _ := json.Marshal(m)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.conn.Write(ctx, websocket.MessageText, data)
}

func (s *wsStream) read(ctx context.Context) (Frame, error) {
	for {
		m, _, err := s.next(ctx)
		if err != nil || m.Type != "" {
			return m, err
		}
	}
}

// frameError is a frame that arrived whole but is not what it says.
type frameError struct{ error }

// next reads one frame. An output frame in the form the fake and the
// reference send ({"type":"stdout","data":"…"}, no escapes) is decoded
// straight into the stream's buffer and returned as (Frame{Type}, data):
// encoding/json's per-byte scan of megabytes of base64 was most of an
// Exec's cost. Any other frame goes through encoding/json. A frame that is
// not JSON is skipped (an empty Type).
func (s *wsStream) next(ctx context.Context) (Frame, []byte, error) {
	typ, r, err := s.conn.Reader(ctx)
	if err != nil {
		return Frame{}, nil, err
	}
	s.raw.Reset()
	if _, err := s.raw.ReadFrom(r); err != nil {
		return Frame{}, nil, err
	}
	if typ != websocket.MessageText {
		return Frame{}, nil, nil
	}
	data := s.raw.Bytes()
	for _, kind := range [...]string{"stdout", "stderr"} {
		prefix := `{"type":"` + kind + `","data":"`
		if !bytes.HasPrefix(data, []byte(prefix)) || !bytes.HasSuffix(data, []byte(`"}`)) {
			continue
		}
		b64 := data[len(prefix) : len(data)-2]
		if bytes.IndexByte(b64, '\\') >= 0 || bytes.IndexByte(b64, '"') >= 0 {
			break
		}
		if n := base64.StdEncoding.DecodedLen(len(b64)); cap(s.dec) < n {
			s.dec = make([]byte, n)
		}
		n, err := base64.StdEncoding.Decode(s.dec[:cap(s.dec)], b64)
		if err != nil {
			return Frame{}, nil, frameError{fmt.Errorf("a %s frame is not base64: %w", kind, err)}
		}
		return Frame{Type: kind}, s.dec[:n], nil
	}
	var m Frame
	if json.Unmarshal(data, &m) != nil {
		return Frame{}, nil, nil
	}
	if m.Type == "stdout" || m.Type == "stderr" {
		b, err := base64.StdEncoding.DecodeString(m.Data)
		if err != nil {
			return Frame{}, nil, frameError{fmt.Errorf("a %s frame is not base64: %w", m.Type, err)}
		}
		return m, b, nil
	}
	return m, nil, nil
}

// Copy writes the stdout and stderr frames until the exit frame.
func (s *wsStream) Copy(stdout, stderr io.Writer) error {
	for {
		m, b, err := s.next(context.Background())
		if err != nil {
			if s.closed.Load() {
				return nil
			}
			if errors.As(err, new(frameError)) {
				return err
			}
			return fmt.Errorf("the exec session of upstash box %s dropped after %d bytes of output, before the command ended: %w", s.h.b.ID, s.got.Load(), err)
		}
		switch m.Type {
		case "stdout", "stderr":
			s.got.Add(int64(len(b)))
			w := stdout
			if m.Type == "stderr" {
				w = stderr
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		case "exit":
			c := -1
			if m.Code != nil {
				c = *m.Code
			}
			s.code.Store(&c)
			return nil
		case "error":
			return fmt.Errorf("upstash box's exec session failed: %s", m.Message)
		}
	}
}

// Write sends stdin frames.
func (s *wsStream) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := p[:min(len(p), stdinChunk)]
		if err := s.send(context.Background(), Frame{Type: "stdin", Data: base64.StdEncoding.EncodeToString(c)}); err != nil {
			return n, sandbox.Wrap(sandbox.Unavailable, s.op, s.h.b.ID, err)
		}
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// CloseStdin sends stdin_close; the output keeps streaming.
func (s *wsStream) CloseStdin() error {
	if err := s.send(context.Background(), Frame{Type: "stdin_close"}); err != nil {
		return sandbox.Wrap(sandbox.Unavailable, s.op, s.h.b.ID, err)
	}
	return nil
}

// Exit returns the code of the exit frame.
func (s *wsStream) Exit(context.Context) (int, error) {
	if c := s.code.Load(); c != nil {
		return *c, nil
	}
	return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.b.ID, "the exec session ended without the command's exit code")
}

// Close drops the socket (which, on Upstash Box, kills the command).
func (s *wsStream) Close() error {
	s.closed.Store(true)
	return s.conn.CloseNow()
}

// httpExec runs argv with POST /v2/box/{id}/exec (no cwd, no env) and
// returns its result.
func (h *handle) httpExec(ctx context.Context, op string, argv []string) (*ExecResult, error) {
	var res ExecResult
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.b.ID, Method: http.MethodPost,
		Path: "/v2/box/" + url.PathEscape(h.b.ID) + "/exec", JSON: ExecRequest{Command: argv}}, &res); err != nil {
		return nil, goneErr(op, h.b.ID, err)
	}
	return &res, nil
}

// specScript is a spawned command as shell text for `sh <file>`: it
// removes its file, exports the overlay (one line per variable, each name
// checked against the env-name rule and each value quoted by
// sandbox.ShellQuote) and execs argv (each word quoted the same way). It
// goes into a file through a session's stdin, never into argv or a REST
// body.
func specScript(env, argv []string) (string, error) {
	var b strings.Builder
	b.WriteString("rm -f -- \"$0\"\n")
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if err := sandbox.ValidateEnvName(k); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "export %s=%s\n", k, sandbox.ShellQuote(v))
	}
	b.WriteString("exec")
	for _, a := range argv {
		b.WriteString(" " + sandbox.ShellQuote(a))
	}
	b.WriteString("\n")
	return b.String(), nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
