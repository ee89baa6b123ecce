package daytona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// uploadPart is the largest piece of stdin one upload request carries.
const uploadPart = 512 << 10

// maxBufferedStdin bounds the stdin an Exec (or a file write) hands over
// in one go.
const maxBufferedStdin = 64 << 20

// launcher runs first in every session command. $1 is the env file ("-"
// for none): sourced, then removed, so the values never stand in argv or
// in the command text Daytona keeps; $2 is the stdin: "n" is /dev/null,
// anything else a directory of parts, joined into one file that is opened
// and removed at once; $3 is the working directory; $4 the workspace root,
// made when it is missing (create makes no request for it). Then the
// command (execproc's wrapper) is exec'd: it keeps the pid setsid gave it,
// the leader of its own process group.
const launcher = `e=$1 i=$2 d=$3 r=$4; shift 4
case $e in -) ;; *) . "$e"; rm -f "$e";; esac
[ -d "$r" ] || mkdir -p "$r"
case $i in n) exec </dev/null;; *) cat "$i"/* >"$i.all" && rm -rf "$i" && exec <"$i.all"; rm -f "$i.all";; esac
cd "$d" || exit 126
exec "$@"`

// backend is execproc's Backend over Daytona's session API: one session
// per command (a session runs its commands one after the other).
type backend struct{ h *handle }

// Start starts spec in a fresh session. An Exec's or the file system's
// stdin is collected until CloseStdin and handed over as a file (a session
// command's own input never reaches EOF); a spawned command reads
// /dev/null and its Write is Unsupported (writableStdin false).
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	if !strings.HasSuffix(op, ".spawn") {
		return b.h.startSync(ctx, op, spec)
	}
	s := &stream{h: b.h, op: op, spec: spec, ctx: ctx, started: make(chan struct{}),
		live: strings.HasSuffix(op, ".spawn")}
	if spec.Stdin && !s.live {
		return s, nil // launched by CloseStdin
	}
	if err := s.launch(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// stream is one session command.
type stream struct {
	h    *handle
	op   string
	spec execproc.Spec
	ctx  context.Context
	live bool

	sid, cmd string
	conn     *websocket.Conn

	started  chan struct{}
	startErr error
	once     sync.Once

	pmu     sync.Mutex
	pending bytes.Buffer

	closed   atomic.Bool
	received atomic.Int64
	exit     atomic.Pointer[int]
	delOnce  sync.Once
}

func (s *stream) tmpDir() string { return path.Join(path.Dir(s.h.root), ".corral") }

// launch uploads the env and stdin files (one request), creates the
// session, starts the command and opens its log stream.
func (s *stream) launch(stdin []byte) (err error) {
	defer func() {
		s.startErr = err
		s.once.Do(func() { close(s.started) })
	}()
	h, ctx, op := s.h, s.ctx, s.op
	id := randomHex(8)
	envArg, inArg := "-", "n"
	files := map[string][]byte{}
	if len(s.spec.Env) > 0 {
		var b strings.Builder
		for _, kv := range s.spec.Env {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, "export %s=%s\n", k, sandbox.ShellQuote(v))
		}
		envArg = path.Join(s.tmpDir(), id+".env")
		files[envArg] = []byte(b.String())
	}
	if stdin != nil {
		// In parts of at most uploadPart bytes, one request each (the
		// launcher joins them), so no request body grows without bound.
		inArg = path.Join(s.tmpDir(), id+".in")
		for i := 0; i == 0 || len(stdin) > 0; i++ {
			n := min(len(stdin), uploadPart)
			files[fmt.Sprintf("%s/%06d", inArg, i)] = stdin[:n]
			stdin = stdin[n:]
			if err := h.upload(ctx, op, files); err != nil {
				return err
			}
			files = map[string][]byte{}
		}
	}
	if len(files) > 0 {
		if err := h.upload(ctx, op, files); err != nil {
			return err
		}
	}
	dir := s.spec.Dir
	if dir == "" {
		dir = h.root
	}
	argv := append([]string{"setsid", "sh", "-c", launcher, "sh", envArg, inArg, dir, h.root}, s.spec.Argv...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = sandbox.ShellQuote(a)
	}
	s.sid = "corral-" + id
	if _, err := h.tb.Do(ctx, cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost, Path: "/process/session",
		JSON: map[string]string{"sessionId": s.sid}}, nil); err != nil {
		return goneErr(op, h.sb.ID, err)
	}
	var res SessionExecuteResponse
	if _, err := h.tb.Do(ctx, cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost,
		Path: "/process/session/" + s.sid + "/exec",
		JSON: SessionExecuteRequest{Command: strings.Join(quoted, " "), RunAsync: true, SuppressInputEcho: true}}, &res); err != nil {
		s.deleteSession()
		return goneErr(op, h.sb.ID, err)
	}
	s.cmd = res.CmdID
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	conn, err := h.tb.Dial(hctx, op, s.cmdPath()+"/logs?follow=true", nil)
	if err != nil {
		return goneErr(op, h.sb.ID, err)
	}
	conn.SetReadLimit(4 << 20)
	s.conn = conn
	return nil
}

func goneErr(op, id string, err error) error {
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return sandbox.Errorf(sandbox.NotFound, op, id, "daytona sandbox is gone")
	}
	return err
}

func (s *stream) cmdPath() string {
	return "/process/session/" + s.sid + "/command/" + url.PathEscape(s.cmd)
}

// Copy demultiplexes the log stream until the daemon closes it.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	<-s.started
	if s.startErr != nil {
		return s.startErr
	}
	if s.conn == nil {
		return nil
	}
	var (
		cur   io.Writer
		carry []byte
	)
	write := func(b []byte) error {
		if len(b) == 0 || cur == nil {
			return nil
		}
		s.received.Add(int64(len(b)))
		_, err := cur.Write(b)
		return err
	}
	for {
		typ, data, err := s.conn.Read(context.Background())
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return write(carry)
			}
			if s.closed.Load() {
				return nil
			}
			return fmt.Errorf("the log stream of daytona command %s dropped after %d bytes of output, before the command ended: %w",
				s.cmd, s.received.Load(), err)
		}
		if typ != websocket.MessageBinary && typ != websocket.MessageText {
			continue
		}
		buf := append(carry, data...)
		carry = nil
		for len(buf) > 0 {
			i := markerIndex(buf)
			if i < 0 {
				// Keep a tail that may be the start of a marker.
				keep := partialMarker(buf)
				if err := write(buf[:len(buf)-keep]); err != nil {
					return err
				}
				carry = append([]byte(nil), buf[len(buf)-keep:]...)
				break
			}
			if err := write(buf[:i]); err != nil {
				return err
			}
			if buf[i] == 1 {
				cur = stdout
			} else {
				cur = stderr
			}
			buf = buf[i+3:]
		}
	}
}

// markerIndex returns the index of the first stream marker in b, or -1.
func markerIndex(b []byte) int {
	o, e := bytes.Index(b, stdoutMarker), bytes.Index(b, stderrMarker)
	switch {
	case o < 0:
		return e
	case e < 0 || o < e:
		return o
	}
	return e
}

// partialMarker returns how many trailing bytes of b could begin a marker.
func partialMarker(b []byte) int {
	for n := min(2, len(b)); n > 0; n-- {
		t := b[len(b)-n:]
		if bytes.Equal(t, stdoutMarker[:n]) || bytes.Equal(t, stderrMarker[:n]) {
			return n
		}
	}
	return 0
}

// Write collects an Exec's stdin, handed over at CloseStdin. A spawned
// command's stdin is unsupported: Daytona's input endpoint writes to a
// FIFO the daemon holds open, so EOF can never be sent, and the contract's
// writableStdin needs it (spawned commands read /dev/null).
func (s *stream) Write(p []byte) (int, error) {
	if s.live {
		return 0, sandbox.Unsupported(Name, "writableStdin")
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.pending.Len()+len(p) > maxBufferedStdin {
		return 0, sandbox.Errorf(sandbox.ResourceExhausted, s.op, s.h.sb.ID, "stdin larger than %d bytes", maxBufferedStdin)
	}
	return s.pending.Write(p)
}

// CloseStdin launches a command whose stdin was collected; for a spawned
// command it is unsupported (see Write).
func (s *stream) CloseStdin() error {
	if s.live {
		return sandbox.Unsupported(Name, "writableStdin")
	}
	s.pmu.Lock()
	data := append([]byte{}, s.pending.Bytes()...)
	s.pmu.Unlock()
	select {
	case <-s.started:
		return s.startErr
	default:
	}
	return s.launch(data)
}

// Exit reads the command's exit code from the daemon, then deletes its
// session.
func (s *stream) Exit(ctx context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	if s.cmd == "" {
		return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.sb.ID, "the command never started")
	}
	for i := 0; ; i++ {
		var c Command
		if _, err := s.h.tb.Do(ctx, cloudhttp.Request{Op: s.op, ID: s.h.sb.ID, Method: http.MethodGet, Path: s.cmdPath()}, &c); err != nil {
			return -1, err
		}
		if c.ExitCode != nil {
			code := *c.ExitCode
			s.exit.Store(&code)
			go s.deleteSession()
			return code, nil
		}
		if i >= 100 {
			return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.sb.ID,
				"the log stream of daytona command %s ended before its exit code and the command still runs", s.cmd)
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return -1, sandbox.Wrap(sandbox.Canceled, s.op, s.h.sb.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// deleteSession removes the command's session (its shell; the command,
// which has its own process group, is not touched).
func (s *stream) deleteSession() {
	s.delOnce.Do(func() {
		if s.sid == "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = s.h.tb.Do(ctx, cloudhttp.Request{Op: s.op, ID: s.h.sb.ID, Method: http.MethodDelete,
			Path: "/process/session/" + s.sid}, nil)
	})
}

// Close abandons the stream (the command runs on).
func (s *stream) Close() error {
	s.closed.Store(true)
	s.once.Do(func() {
		s.startErr = errors.New("closed before the command started")
		close(s.started)
	})
	if s.conn != nil {
		_ = s.conn.CloseNow()
	}
	return nil
}

// upload writes files through one multipart files/bulk-upload request.
func (h *handle) upload(ctx context.Context, op string, files map[string][]byte) error {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	i := 0
	for p, data := range files {
		_ = mw.WriteField(fmt.Sprintf("files[%d].path", i), p)
		w, err := mw.CreateFormFile(fmt.Sprintf("files[%d].file", i), p)
		if err != nil {
			return err
		}
		_, _ = w.Write(data)
		i++
	}
	if err := mw.Close(); err != nil {
		return err
	}
	_, err := h.tb.Do(ctx, cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost, Path: "/files/bulk-upload",
		Body: body.Bytes(), ContentType: mw.FormDataContentType(), Idempotent: true}, nil)
	return err
}
