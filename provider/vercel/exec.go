package vercel

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// uploadPart is the largest piece of stdin one fs/write carries.
const uploadPart = 512 << 10

// maxBufferedStdin bounds the stdin an Exec (or a file write) hands over.
const maxBufferedStdin = 64 << 20

// reattaches bounds how often a dropped output stream is re-read.
const reattaches = 3

// launcher runs first in every command. $1 is the stdin: "-" is
// /dev/null, anything else a directory of parts (uploaded by fs/write),
// joined into one file that is opened and removed at once. Then the
// command (execproc's wrapper) starts in a session of its own when setsid
// exists — so it leads a process group whatever the API's daemon does and
// the group kill reaches its grandchildren — and the launcher waits for
// it (its exit status is the command's, 128+N for signal N). The Vercel
// API has no stdin for commands, hence the file.
const launcher = `i=$1; shift
case $i in -) exec </dev/null;; *) cat "$i"/* >"$i.all" && rm -rf "$i" && exec <"$i.all"; rm -f "$i.all";; esac
` + execproc.LeadGroup

// backend is execproc's Backend over the session's command API.
type backend struct{ h *handle }

// Start starts spec. An Exec's or the file system's stdin is collected
// until CloseStdin and uploaded as a file; a spawned command reads
// /dev/null (the API has no stdin: writableStdin is false).
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	s := &stream{h: b.h, op: op, spec: spec, ctx: ctx, started: make(chan struct{}), live: strings.HasSuffix(op, ".spawn")}
	if spec.Stdin && !s.live {
		return s, nil // launched by CloseStdin
	}
	if err := s.launch(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// stream is one command: POST …/cmd with wait and logs, whose NDJSON
// answer carries the command, its output and its exit.
type stream struct {
	h    *handle
	op   string
	spec execproc.Spec
	ctx  context.Context
	live bool

	sid, cmd string
	body     io.ReadCloser
	cmu      sync.Mutex
	cancel   context.CancelFunc

	started  chan struct{}
	startErr error
	once     sync.Once

	pmu     sync.Mutex
	pending bytes.Buffer

	closed atomic.Bool
	got    [2]int64 // bytes of stdout, stderr received
	exit   atomic.Pointer[int]
}

// launch uploads the stdin (in parts) and starts the command.
func (s *stream) launch(stdin []byte) (err error) {
	defer func() {
		s.startErr = err
		s.once.Do(func() { close(s.started) })
	}()
	h, ctx, op := s.h, s.ctx, s.op
	in := "-"
	if stdin != nil {
		in = "/tmp/corral-in-" + randomHex(8)
		for i := 0; i == 0 || len(stdin) > 0; i++ {
			n := min(len(stdin), uploadPart)
			if err := h.writeFile(ctx, op, fmt.Sprintf("%s/%06d", in, i), stdin[:n]); err != nil {
				return err
			}
			stdin = stdin[n:]
		}
	}
	env := map[string]string{}
	for _, kv := range s.spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	dir := s.spec.Dir
	if dir == "" {
		dir = h.root
	}
	args := append([]string{"-c", launcher, "sh", in}, s.spec.Argv...)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // until the answer starts
	var resp *http.Response
	for try := 0; ; try++ {
		sid := h.session()
		req := h.sessionReq(op, sid, http.MethodPost, "/cmd")
		req.JSON = RunCommand{Command: "sh", Args: args, Cwd: dir, Env: env, Wait: true, Logs: true}
		resp, err = h.p.c.Stream(sctx, req)
		if err != nil && try == 0 && stopped(err) {
			if err = h.resume(ctx, op, sid); err == nil {
				continue
			}
		}
		break
	}
	stopped := stop()
	if err != nil || !stopped {
		cancel()
		if err == nil {
			resp.Body.Close()
			err = sandbox.Wrap(sandbox.Canceled, op, h.name, ctx.Err())
		}
		return err
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		cancel()
		resp.Body.Close()
		return sandbox.Errorf(sandbox.Internal, op, h.name, "vercel answered a command with %q, not an NDJSON stream", ct)
	}
	s.cmu.Lock()
	s.sid, s.body, s.cancel = h.session(), resp.Body, cancel
	s.cmu.Unlock()
	// The first line is the command record.
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	line, err := br.ReadBytes('\n')
	var first streamLine
	if err != nil || json.Unmarshal(line, &first) != nil || first.Command == nil {
		cancel()
		resp.Body.Close()
		return sandbox.Errorf(sandbox.Unavailable, op, h.name, "the vercel command stream ended before the command record")
	}
	s.cmd = first.Command.ID
	s.body = readCloser{br, resp.Body}
	return nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// Copy writes the command's output as it streams. A stream that drops
// before the finished record is read again from the logs endpoint,
// skipping what was received.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	<-s.started
	if s.startErr != nil {
		return s.startErr
	}
	body := s.body
	var lastErr error
	for attempt := 0; ; attempt++ {
		skip := s.got
		if attempt == 0 {
			skip = [2]int64{}
		}
		finished, err := s.read(body, stdout, stderr, &skip, attempt > 0)
		body.Close()
		if finished || s.closed.Load() {
			return nil
		}
		if err != nil && errors.Is(err, errWriter) {
			return err
		}
		lastErr = err
		if attempt >= reattaches {
			return fmt.Errorf("the output stream of vercel command %s dropped after %d+%d bytes and could not be re-read: %v",
				s.cmd, s.got[0], s.got[1], lastErr)
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.cmu.Lock()
		s.cancel = cancel
		s.cmu.Unlock()
		if s.closed.Load() {
			cancel()
			return nil
		}
		resp, err := s.h.p.c.Stream(ctx, s.h.sessionReq(s.op, s.sid, http.MethodGet, "/cmd/"+s.cmd+"/logs"))
		if err != nil {
			cancel()
			return fmt.Errorf("the output stream of vercel command %s dropped after %d+%d bytes (%v); re-reading its logs: %w",
				s.cmd, s.got[0], s.got[1], lastErr, err)
		}
		body = resp.Body
	}
}

var errWriter = errors.New("output writer failed")

// read copies NDJSON lines; skip is how much of each stream was already
// delivered (a re-read starts from the beginning). It reports whether the
// finished command record arrived (the logs endpoint has none: its end is
// the command's end, and the exit code is asked for).
func (s *stream) read(body io.Reader, stdout, stderr io.Writer, skip *[2]int64, logsOnly bool) (bool, error) {
	dec := json.NewDecoder(body)
	for {
		var l streamLine
		if err := dec.Decode(&l); err != nil {
			if err == io.EOF && logsOnly {
				return true, nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return false, err
		}
		if l.Command != nil {
			if l.Command.ExitCode != nil {
				code := *l.Command.ExitCode
				s.exit.Store(&code)
				return true, nil
			}
			continue
		}
		i, w := 0, stdout
		switch l.Stream {
		case "stdout":
		case "stderr":
			i, w = 1, stderr
		case "error":
			var e struct{ Code, Message string }
			_ = json.Unmarshal(l.Data, &e)
			return false, fmt.Errorf("vercel stream error %s: %s", e.Code, e.Message)
		default:
			continue
		}
		var data string
		if json.Unmarshal(l.Data, &data) != nil {
			continue
		}
		b := []byte(data)
		if skip[i] > 0 {
			n := min(int64(len(b)), skip[i])
			b, skip[i] = b[n:], skip[i]-n
		}
		if len(b) == 0 {
			continue
		}
		s.got[i] += int64(len(b))
		if _, err := w.Write(b); err != nil {
			return false, fmt.Errorf("%w: %v", errWriter, err)
		}
	}
}

// Write collects an Exec's stdin, uploaded at CloseStdin. A spawned
// command has no stdin on Vercel.
func (s *stream) Write(p []byte) (int, error) {
	if s.live {
		return 0, sandbox.Unsupported(Name, "writableStdin")
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.pending.Len()+len(p) > maxBufferedStdin {
		return 0, sandbox.Errorf(sandbox.ResourceExhausted, s.op, s.h.name, "stdin larger than %d bytes", maxBufferedStdin)
	}
	return s.pending.Write(p)
}

// CloseStdin launches a command whose stdin was collected.
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

// Exit returns the exit code from the stream's finished record, or asks
// the API (GET …/cmd/{id}?wait=true) when the stream was re-read.
func (s *stream) Exit(ctx context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	if s.cmd == "" {
		return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.name, "the command never started")
	}
	req := s.h.sessionReq(s.op, s.sid, http.MethodGet, "/cmd/"+s.cmd)
	req.Query.Set("wait", "true")
	req.Timeout = 10 * time.Minute
	var ans struct {
		Command Command `json:"command"`
	}
	if _, err := s.h.p.c.Do(ctx, req, &ans); err != nil {
		return -1, err
	}
	if ans.Command.ExitCode == nil {
		return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.name, "vercel command %s has no exit code", s.cmd)
	}
	code := *ans.Command.ExitCode
	s.exit.Store(&code)
	return code, nil
}

// Close abandons the stream (the command runs on).
func (s *stream) Close() error {
	s.closed.Store(true)
	s.once.Do(func() {
		s.startErr = errors.New("closed before the command started")
		close(s.started)
	})
	s.cmu.Lock()
	if s.cancel != nil {
		s.cancel()
	}
	s.cmu.Unlock()
	return nil
}

// writeFile writes one file through fs/write (a gzipped tar extracted at
// /), making its parent directories.
func (h *handle) writeFile(ctx context.Context, op, path string, data []byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(path, "/"), Mode: 0o600, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, _ = tw.Write(data)
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	_, err := h.do(ctx, op, http.MethodPost, "/fs/write", func(r *cloudhttp.Request) {
		r.Body, r.ContentType, r.Idempotent = buf.Bytes(), "application/gzip", true
		r.Header = http.Header{"X-Cwd": {"/"}}
	}, nil)
	return err
}
