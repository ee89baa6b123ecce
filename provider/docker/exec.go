package docker

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// Commands run through sandbox/execproc on the Engine's exec API: the
// Backend below creates an exec, attaches to its multiplexed stream and
// reads its exit code. Docker cannot signal an exec (only the container's
// PID 1), but an exec leads its own session and process group, so the
// layer's default group kill (a kill script run as a second exec) reaches
// every process the command started.

// backend is the execproc.Backend of one container.
type backend struct{ h *handle }

// Start creates an exec and attaches to it.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	h := b.h
	user := spec.User
	if user == "" {
		user = h.user
	}
	cr, err := h.p.cli.ExecCreate(ctx, h.cid, client.ExecCreateOptions{
		Cmd: spec.Argv, Env: spec.Env, WorkingDir: spec.Dir, User: user,
		AttachStdin: spec.Stdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, h.execError(op, err)
	}
	ar, err := h.p.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, h.execError(op, err)
	}
	return &stream{h: h, op: op, execID: cr.ID, hj: ar.HijackedResponse}, nil
}

// stream is one attached exec.
type stream struct {
	h      *handle
	op     string
	execID string
	hj     client.HijackedResponse
}

// Copy demultiplexes the exec's stream.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	_, err := stdcopy.StdCopy(stdout, stderr, s.hj.Reader)
	return err
}

// Write writes to the exec's stdin.
func (s *stream) Write(p []byte) (int, error) { return s.hj.Conn.Write(p) }

// CloseStdin half-closes the hijacked connection.
func (s *stream) CloseStdin() error { return s.hj.CloseWrite() }

// Close closes the hijacked connection.
func (s *stream) Close() error {
	s.hj.Close()
	return nil
}

// Exit reads the exec's exit code.
func (s *stream) Exit(ctx context.Context) (int, error) { return s.h.exitCode(ctx, s.op, s.execID) }

// execError explains the two common failures: the container is gone or
// stopped.
func (h *handle) execError(op string, err error) error {
	e := h.p.apiError(op, h.id, err)
	var se *sandbox.Error
	if errors.As(e, &se) && se.Msg == "" {
		switch se.Code {
		case sandbox.NotFound:
			se.Msg = "the sandbox's container is gone"
		case sandbox.FailedPrecondition:
			if notRunning(err) {
				se.Msg = "the sandbox's container is not running (Resume starts it)"
			}
		}
	}
	return e
}

// exitCode reads an exec's exit code, polling briefly while the daemon
// has not yet recorded the exit.
func (h *handle) exitCode(ctx context.Context, op, execID string) (int, error) {
	delay := time.Millisecond
	for {
		res, err := h.p.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return -1, h.p.apiError(op, h.id, err)
		}
		if !res.Running {
			return res.ExitCode, nil
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return -1, sandbox.Wrap(sandbox.Canceled, op, h.id, ctx.Err())
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// Exec runs a command to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.procs.Exec(ctx, cmd)
}

// Spawn starts a command and returns once it runs (its PID is known).
// Cancelling ctx, or Command.Timeout passing, kills it.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return h.procs.Spawn(ctx, cmd)
}

// run executes argv unwrapped, with no environment, from "/", feeding it
// stdin, and returns its complete output. It serves the file system and
// setup as root. user overrides the container's user when set.
func (h *handle) run(ctx context.Context, op string, argv []string, stdin io.Reader, user string) (*sandbox.ExecResult, error) {
	return h.procs.Run(ctx, op, argv, stdin, user)
}
