package blaxel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// maxBufferedStdin bounds the stdin an Exec (or a file write) hands over.
const maxBufferedStdin = 64 << 20

// launcher runs first in every command (the sandbox-api runs `sh -c
// <command>`, so the command is this script with its arguments quoted).
// $1 is the stdin: "-" is /dev/null, anything else a file uploaded through
// the filesystem API, opened and removed at once. Then the command starts
// in a session of its own when setsid exists (so it leads a process group
// and execproc's group kill reaches its grandchildren) and the launcher
// waits for it: its exit status is the command's, 128+N for signal N.
const launcher = `i=$1; shift
case $i in -) exec </dev/null;; *) exec <"$i"; rm -f -- "$i";; esac
` + execproc.LeadGroup

// backend is execproc's Backend over the sandbox-api's process API.
type backend struct{ h *handle }

// Start starts spec. An Exec's or the file system's stdin is collected
// until CloseStdin and uploaded as a file; a spawned command reads
// /dev/null (writableStdin is false).
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

// stream is one command: POST /process under Accept: text/event-stream,
// whose NDJSON answer carries its output and, last, its record.
type stream struct {
	h    *handle
	op   string
	spec execproc.Spec
	ctx  context.Context
	live bool

	body   io.ReadCloser
	cmu    sync.Mutex
	cancel context.CancelFunc

	started  chan struct{}
	startErr error
	once     sync.Once

	pmu     sync.Mutex
	pending bytes.Buffer

	closed atomic.Bool
	exit   atomic.Pointer[int]
}

// command is the shell text of argv for the sandbox-api's `sh -c`.
func command(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = sandbox.ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// launch uploads the stdin and starts the command.
func (s *stream) launch(stdin []byte) (err error) {
	defer func() {
		s.startErr = err
		s.once.Do(func() { close(s.started) })
	}()
	h, ctx, op := s.h, s.ctx, s.op
	in := "-"
	if stdin != nil {
		in = "/tmp/corral-in-" + randomHex(8)
		if err := h.writeFile(ctx, op, in, stdin); err != nil {
			return err
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
	argv := append([]string{"sh", "-c", launcher, "sh", in}, s.spec.Argv...)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel) // until the answer starts
	req := cloudhttp.Request{Op: op, ID: h.name, Method: http.MethodPost, Path: "/process",
		Header: http.Header{"Accept": {"text/event-stream"}},
		JSON:   ProcessRequest{Command: command(argv), Env: env, WorkingDir: dir, Name: "corral-" + randomHex(6), WaitForCompletion: true}}
	resp, err := h.sc.Stream(sctx, req)
	stopped := stop()
	if err != nil || !stopped {
		cancel()
		if err == nil {
			resp.Body.Close()
			err = sandbox.Wrap(sandbox.Canceled, op, h.name, ctx.Err())
		}
		return err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.Contains(ct, "application/x-ndjson") {
		cancel()
		resp.Body.Close()
		return sandbox.Errorf(sandbox.Internal, op, h.name, "blaxel answered a command with %q, not an NDJSON stream", ct)
	}
	s.cmu.Lock()
	s.body, s.cancel = resp.Body, cancel
	s.cmu.Unlock()
	return nil
}

// Copy writes the command's output as it streams, until its record.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	<-s.started
	if s.startErr != nil {
		return s.startErr
	}
	defer s.body.Close()
	// A json.Decoder, not a line scanner: the result line repeats the
	// record's output (its last 64 KiB per stream) and has no bound here.
	dec := json.NewDecoder(bufio.NewReaderSize(s.body, 64<<10))
	for {
		var e streamEvent
		if err := dec.Decode(&e); err != nil {
			if s.closed.Load() {
				return nil
			}
			if err == io.EOF {
				return errors.New("the output stream of a blaxel process ended before its result")
			}
			return fmt.Errorf("the output stream of a blaxel process dropped: %w", err)
		}
		var w io.Writer
		switch e.Type {
		case "stdout":
			w = stdout
		case "stderr":
			w = stderr
		case "result":
			var res ProcessResponse
			if err := json.Unmarshal([]byte(e.Data), &res); err != nil {
				return fmt.Errorf("blaxel process stream: bad result: %v", err)
			}
			code := res.ExitCode
			s.exit.Store(&code)
			return nil
		case "error":
			return fmt.Errorf("blaxel process error: %s", e.Data)
		default:
			continue
		}
		if _, err := io.WriteString(w, e.Data); err != nil {
			return err
		}
	}
}

// Write collects an Exec's stdin, uploaded at CloseStdin. A spawned
// command has no stdin here.
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

// Exit returns the exit code of the stream's result record.
func (s *stream) Exit(context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.name, "the blaxel process stream ended without the process's result")
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

// writeFile writes one file through the filesystem API (a multipart PUT,
// byte-exact, as the SDK's writeBinary sends it).
func (h *handle) writeFile(ctx context.Context, op, path string, data []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fw, err := mw.CreateFormFile("file", "stdin.bin")
	if err != nil {
		return err
	}
	_, _ = fw.Write(data)
	_ = mw.WriteField("permissions", "0600")
	_ = mw.WriteField("path", path)
	if err := mw.Close(); err != nil {
		return err
	}
	_, err = h.sc.Do(ctx, cloudhttp.Request{Op: op, ID: h.name, Method: http.MethodPut, Path: "/filesystem" + path,
		Body: buf.Bytes(), ContentType: mw.FormDataContentType()}, nil)
	return err
}
