// Package execproc is the process layer of providers that reach their
// sandboxes over a wire (a container engine's exec API, a cloud's REST or
// WebSocket process API). Such a backend can usually start a command with
// its streams and report its exit code, and little else: it cannot signal
// a process group, its own kill may reach a single pid, and its output
// arrives on one connection that nobody bounds. execproc builds the whole
// sandbox.Handle process surface — Exec, Spawn, Process — on that small
// primitive, so that a provider holds only what is its own.
//
// A provider supplies a Backend (start one command, with stdout, stderr,
// stdin where the backend has it, and its exit code) and gets:
//
//   - A pid-reporting wrapper: every command runs under a POSIX sh that
//     writes its pid as a control line on stderr (taken off the stream
//     before the caller sees it), checks and enters Command.Dir with the
//     shared symlink guard (sandbox.ShellPathGuard), and then execs the
//     command. The command leads its own process group when the backend
//     starts it in a fresh session (a docker exec does; so do most process
//     APIs), which is what makes the group kill reach backgrounded
//     grandchildren.
//   - Kill as the contract describes it: SIGTERM to the group, a grace
//     period, SIGKILL, and a check that the group is gone. The strategy is
//     the provider's: GroupKill (the default: a kill script run through the
//     backend as a second command), the backend's own group kill, or PIDOnly
//     for a backend whose native kill reaches one pid (a backgrounded
//     grandchild survives it; the conformance suite's KillMeasured case
//     shows that, so such a provider must not claim KillableProcesses).
//   - Bounded output: Exec keeps at most Command.OutputLimit bytes of each
//     stream; a spawned process's unread output is buffered up to 4 MiB per
//     stream, after which the command waits as it would on a full pipe.
//   - Timeouts and cancellation: Command.Timeout and the context end Exec
//     and kill the command; cancelling Spawn's context kills the process.
//
// Operation names in errors are "<provider>.exec", "<provider>.spawn" and
// "<provider>.kill", with the sandbox id as the subject.
package execproc

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Spec is one command for Backend.Start, already wrapped: Argv is what
// the backend runs, verbatim.
type Spec struct {
	// Argv is the program and its arguments.
	Argv []string
	// Env is the command's environment as KEY=VALUE entries, laid over the
	// backend's default environment; nil adds nothing.
	Env []string
	// Dir is the absolute working directory inside the sandbox.
	Dir string
	// User is the user to run as where the backend has users; "" is the
	// provider's default.
	User string
	// Stdin says the caller will write to the command's standard input.
	// When false the backend should give the command an empty stdin.
	Stdin bool
}

// Backend starts commands in one sandbox. It is the only thing a provider
// writes to get Exec, Spawn and Process.
type Backend interface {
	// Start starts spec and returns its stream. op names the operation for
	// errors ("docker.exec"); errors should be *sandbox.Error values with
	// the backend's meaning (NotFound for a gone sandbox, Unavailable for a
	// transport failure).
	Start(ctx context.Context, op string, spec Spec) (Stream, error)
}

// Stream is one started command. Copy is called exactly once; Write and
// CloseStdin may be called concurrently with it; Close at any time, more
// than once, and always once Copy returned; Exit only after that Close.
// So a backend that learns the exit code from the stream itself (a
// WebSocket's last message) must have read it by the time Copy returns.
type Stream interface {
	// Copy copies the command's stdout and stderr to the writers until its
	// output ends (the command exited and its output drained, or Close was
	// called) and returns the transport error that ended it early, if any.
	// A writer's error ends the copy too.
	Copy(stdout, stderr io.Writer) error
	// Write writes to the command's standard input.
	Write(p []byte) (int, error)
	// CloseStdin sends EOF on standard input while the output keeps
	// streaming. A backend without a half-close returns an
	// UnsupportedCapabilityError.
	CloseStdin() error
	// Exit returns the command's exit code (128+N when signal N ended it).
	// It is called after Copy returned and the stream was closed.
	Exit(ctx context.Context) (int, error)
	// Close abandons the stream: Copy returns soon after. It does not kill
	// the command.
	Close() error
}

// KillFunc ends a started command's process tree: it sends sig to the
// process group led by pid; for SIGTERM it sends SIGKILL to whatever is
// left after grace, and for SIGTERM and SIGKILL it returns once nothing
// of the group is left (an error when something survived SIGKILL). Other
// signals are only delivered. A group that is already gone is success.
type KillFunc func(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error

// Options configure a Runner.
type Options struct {
	// Provider is the provider's name, the prefix of operation names.
	Provider string
	// ID is the sandbox id, the subject of errors.
	ID string
	// Root is the workspace root inside the sandbox: where commands run
	// and what Command.Dir is resolved under.
	Root string
	// Env returns the sandbox's environment (create-time variables with
	// SetEnv's overlay) at the time a command starts; nil means none. A
	// command's own Env is laid over it.
	Env func() map[string]string
	// KillGrace is how long a kill waits after SIGTERM before SIGKILL.
	// Default 2s.
	KillGrace time.Duration
	// Kill is the kill strategy. Nil is the Runner's GroupKill: a kill
	// script run through the backend.
	Kill KillFunc
	// Logger receives reports of kills that failed in the background.
	// Default: discard.
	Logger *slog.Logger
}

// Runner runs commands in one sandbox through a Backend. It is safe for
// concurrent use.
type Runner struct {
	b    Backend
	opts Options
	log  *slog.Logger
	kill KillFunc
}

// New returns a Runner over b.
func New(b Backend, opts Options) *Runner {
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	if opts.Root == "" {
		opts.Root = "/"
	}
	r := &Runner{b: b, opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.kill = opts.Kill
	if r.kill == nil {
		r.kill = r.GroupKill
	}
	return r
}

func (r *Runner) op(name string) string { return r.opts.Provider + "." + name }

// Exec runs cmd to completion: the contract's Handle.Exec.
func (r *Runner) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	op := r.op("exec")
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	stdout := &capBuf{limit: cmd.OutputLimit}
	stderr := &capBuf{limit: cmd.OutputLimit}
	p, err := r.start(ctx, op, cmd, cmd.Stdin != nil, stdout, stderr, func(error) {})
	if err != nil {
		return nil, err
	}
	if cmd.Stdin != nil {
		go p.feed(cmd.Stdin)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.abort(ctx)
		return nil, sandbox.Wrap(sandbox.Canceled, op, r.opts.ID, ctx.Err())
	}
	if p.ctlErr != nil {
		return nil, p.ctlErr
	}
	if p.streamErr != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, op, r.opts.ID, p.streamErr)
	}
	code, err := p.exit(ctx)
	if err != nil {
		return nil, err
	}
	if p.pid == 0 {
		return nil, noWrapper(op, r.opts.ID, code, stderr.buf.Bytes())
	}
	return &sandbox.ExecResult{
		ExitCode:        code,
		Stdout:          stdout.buf.Bytes(),
		Stderr:          stderr.buf.Bytes(),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
	}, nil
}

// Spawn starts cmd and returns once it runs (its pid is known): the
// contract's Handle.Spawn. Cancelling ctx, or Command.Timeout passing,
// kills it. Output the caller does not read is buffered up to 4 MiB per
// stream.
func (r *Runner) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	op := r.op("spawn")
	if cmd.Stdin != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, r.opts.ID, "Command.Stdin is for Exec; write to Process.Stdin instead")
	}
	stdout, stderr := newBufPipe(), newBufPipe()
	closeOut := func(err error) {
		stdout.closeWithError(err)
		stderr.closeWithError(err)
	}
	p, err := r.start(ctx, op, cmd, true, stdout, stderr, closeOut)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.ctl:
	case <-ctx.Done():
		p.abort(ctx)
		return nil, sandbox.Wrap(sandbox.Canceled, op, r.opts.ID, ctx.Err())
	}
	if p.ctlErr != nil {
		<-p.done
		return nil, p.ctlErr
	}
	if p.pid == 0 {
		<-p.done
		code, _ := p.exit(ctx)
		msg, _ := io.ReadAll(stderr)
		return nil, noWrapper(op, r.opts.ID, code, msg)
	}
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		go func() {
			<-p.done
			cancel()
		}()
	}
	stop := context.AfterFunc(ctx, func() {
		kctx, cancel := context.WithTimeout(context.Background(), r.opts.KillGrace+time.Minute)
		defer cancel()
		if err := p.Kill(kctx, syscall.SIGTERM); err != nil {
			r.log.Warn(r.opts.Provider+": killing a cancelled process failed", "id", r.opts.ID, "pid", p.pid, "err", err)
		}
	})
	go func() {
		<-p.done
		stop()
	}()
	return p, nil
}

// Run executes argv as it is — no wrapper, no environment, from "/" —
// feeding it stdin, and returns its whole output. It is for the
// provider's own plumbing (an exec-backed file system, the kill script);
// cancelling ctx abandons the command without killing it. user is as in
// Spec.User.
func (r *Runner) Run(ctx context.Context, op string, argv []string, stdin io.Reader, user string) (*sandbox.ExecResult, error) {
	s, err := r.b.Start(ctx, op, Spec{Argv: argv, Dir: "/", User: user, Stdin: stdin != nil})
	if err != nil {
		return nil, err
	}
	var stdout, stderr capBuf
	copied := make(chan error, 1)
	go func() { copied <- s.Copy(&stdout, &stderr) }()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(streamWriter{s}, stdin)
			_ = s.CloseStdin()
		}()
	}
	select {
	case err = <-copied:
	case <-ctx.Done():
		_ = s.Close()
		<-copied
		return nil, sandbox.Wrap(sandbox.Canceled, op, r.opts.ID, ctx.Err())
	}
	_ = s.Close()
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, op, r.opts.ID, err)
	}
	code, err := s.Exit(ctx)
	if err != nil {
		return nil, err
	}
	return &sandbox.ExecResult{ExitCode: code, Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes()}, nil
}

// streamWriter adapts a Stream's Write to io.Writer for io.Copy.
type streamWriter struct{ s Stream }

func (w streamWriter) Write(b []byte) (int, error) { return w.s.Write(b) }

// noWrapper is the error for a command whose wrapper never reported.
func noWrapper(op, id string, code int, stderr []byte) error {
	return sandbox.Errorf(sandbox.FailedPrecondition, op, id,
		"the command wrapper could not start (exit %d); the sandbox needs a POSIX sh: %s", code, trim(stderr))
}
