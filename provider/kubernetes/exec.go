package kubernetes

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// Commands run through the exec subresource on sandbox/execproc. The
// exec API takes only argv, so every command starts under launcher: it
// enters the working directory ($1), reads the environment from a prelude
// on standard input when $2 is 1, and runs "$@" as the leader of a
// session of its own (execproc.LeadGroup), so the layer's group kill
// reaches its grandchildren.
//
// The prelude is a count line and one "NAME VALUE" line per variable,
// VALUE with every byte outside a safe set written as a \0ooo escape that
// printf %b decodes; the shell's read builtin takes it byte by byte, so the
// command's own standard input starts right after it. Values (secrets)
// thus never appear in argv, which the API server logs and every process
// in the pod can read.
const launcher = `cd "$1" || exit 126
e=$2
shift 2
if [ "$e" = 1 ]; then
  IFS= read -r n || exit 125
  while [ "$n" -gt 0 ]; do
    IFS=' ' read -r k v || exit 125
    v=$(printf '%bx' "$v")
    export "$k=${v%x}"
    n=$((n - 1))
  done
  unset e n k v
fi
` + execproc.LeadGroup

// envPrelude encodes KEY=VALUE entries for the launcher.
func envPrelude(env []string) []byte {
	var b bytes.Buffer
	b.WriteString(strconv.Itoa(len(env)))
	b.WriteByte('\n')
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		b.WriteString(k)
		b.WriteByte(' ')
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_./:=+,@-", c) >= 0 {
				b.WriteByte(c)
				continue
			}
			b.WriteString(`\0`)
			b.WriteByte('0' + c>>6)
			b.WriteByte('0' + c>>3&7)
			b.WriteByte('0' + c&7)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// launchArgv is the argv the exec request carries for spec.
func launchArgv(spec execproc.Spec) []string {
	dir := spec.Dir
	if dir == "" {
		dir = "/"
	}
	e := "0"
	if len(spec.Env) > 0 {
		e = "1"
	}
	return append([]string{"sh", "-c", launcher, "sh", dir, e}, spec.Argv...)
}

// backend is the execproc.Backend of one Pod.
type backend struct{ h *handle }

// Start opens an exec stream to the sandbox's container.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	h := b.h
	p := h.p
	withStdin := spec.Stdin || len(spec.Env) > 0
	exe, err := p.executor(p.core.execURL(p.ns, h.pod, &corev1.PodExecOptions{
		Container: containerName, Command: launchArgv(spec),
		Stdin: withStdin, Stdout: true, Stderr: true,
	}))
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, h.id, err)
	}
	s := &stream{h: h, op: op, done: make(chan struct{})}
	s.outR, s.outW = io.Pipe()
	s.errR, s.errW = io.Pipe()
	var stdin io.Reader
	if withStdin {
		var parts []io.Reader
		if len(spec.Env) > 0 {
			parts = append(parts, bytes.NewReader(envPrelude(spec.Env)))
		}
		if spec.Stdin {
			s.inR, s.inW = io.Pipe()
			parts = append(parts, s.inR)
		}
		stdin = io.MultiReader(parts...)
	}
	// The stream outlives ctx (a spawned command runs on after Spawn
	// returns); Close cancels it.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		err := exe.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: s.outW, Stderr: s.errW})
		s.finish(err)
	}()
	return s, nil
}

// stream is one exec: its output arrives through pipes that the exec's
// goroutine writes and Copy drains.
type stream struct {
	h      *handle
	op     string
	cancel context.CancelFunc

	outR, errR *io.PipeReader
	outW, errW *io.PipeWriter
	inR        *io.PipeReader // nil without stdin
	inW        *io.PipeWriter

	done   chan struct{} // closed when the exec ended
	mu     sync.Mutex
	code   int
	err    error // the transport error, nil after an exit status
	closed bool  // Close was called before the end
}

// finish records how the exec ended and ends the pipes.
func (s *stream) finish(err error) {
	code := 0
	var exit interface{ ExitStatus() int }
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code, err = exit.ExitStatus(), nil
	default:
		err = s.h.execError(s.op, err)
	}
	s.mu.Lock()
	s.code, s.err = code, err
	s.mu.Unlock()
	s.outW.Close()
	s.errW.Close()
	if s.inR != nil {
		s.inR.CloseWithError(io.ErrClosedPipe)
	}
	close(s.done)
}

// Copy copies the exec's stdout and stderr until both end.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	errc := make(chan error, 1)
	go func() {
		_, err := io.Copy(stderr, s.errR)
		if err != nil {
			s.errR.CloseWithError(err)
		}
		errc <- err
	}()
	_, err := io.Copy(stdout, s.outR)
	if err != nil {
		s.outR.CloseWithError(err) // unblocks the exec's writer
	}
	if e := <-errc; err == nil {
		err = e
	}
	if err != nil {
		_ = s.Close()
		return err
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Write writes to the command's standard input.
func (s *stream) Write(p []byte) (int, error) {
	if s.inW == nil {
		return 0, sandbox.Errorf(sandbox.FailedPrecondition, s.op, s.h.id, "the command was started without stdin")
	}
	return s.inW.Write(p)
}

// CloseStdin sends EOF: the WebSocket protocol's stdin close (v5) or the
// SPDY stream's half-close.
func (s *stream) CloseStdin() error {
	if s.inW == nil {
		return nil
	}
	return s.inW.Close()
}

// Close abandons the stream; the command is not killed.
func (s *stream) Close() error {
	select {
	case <-s.done:
	default:
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
	}
	s.cancel()
	s.outR.CloseWithError(io.ErrClosedPipe)
	s.errR.CloseWithError(io.ErrClosedPipe)
	return nil
}

// Exit returns the command's exit status once the exec ended.
func (s *stream) Exit(ctx context.Context) (int, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return -1, sandbox.Wrap(sandbox.Canceled, s.op, s.h.id, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return -1, s.err
	}
	if s.closed {
		return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.id, "the exec stream was closed before the command's exit status arrived")
	}
	return s.code, nil
}

// execError maps an exec failure: a Pod or container that is gone is
// NotFound, the rest comes from apiError.
func (h *handle) execError(op string, err error) error {
	var se *apierrors.StatusError
	msg := strings.ToLower(err.Error())
	if errors.As(err, &se) && apierrors.IsNotFound(se) ||
		strings.Contains(msg, "not found") || strings.Contains(msg, "container not running") ||
		strings.Contains(msg, "cannot exec in a deleted state") {
		return sandbox.Errorf(sandbox.NotFound, op, h.id, "the sandbox's pod or container is gone: %v", err)
	}
	if httpstream.IsUpgradeFailure(err) {
		return sandbox.Wrap(sandbox.Unavailable, op, h.id, err)
	}
	return h.p.apiError(op, h.id, err)
}
