package execproc

import (
	"context"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// proc is one wrapped command; it implements sandbox.Process.
type proc struct {
	r   *Runner
	op  string
	s   Stream
	dir string // Command.Dir, for errors

	ctl    chan struct{} // closed once the control line arrived or the stream ended
	pid    int           // valid after ctl; 0 when the wrapper never reported
	ctlErr error         // valid after ctl: a Dir that could not be entered

	done      chan struct{} // closed once the output stream ended
	streamErr error         // valid after done

	stdout, stderr io.Writer
	closeOut       func(error)

	stdinOnce sync.Once
	stdinErr  error

	exitMu   sync.Mutex
	exitSet  bool
	exitCode int

	killMu  sync.Mutex
	killing chan struct{} // non-nil while a kill runs
	killErr error
	killed  bool // a kill ran; closing the stream afterwards is expected
}

var _ sandbox.Process = (*proc)(nil)

// start validates cmd and starts it wrapped. stdout and stderr receive
// the output; closeOut is called once the stream ends.
func (r *Runner) start(ctx context.Context, op string, cmd sandbox.Command, stdin bool, stdout, stderr io.Writer, closeOut func(error)) (*proc, error) {
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, op, r.opts.ID, err)
	}
	argv := cmd.Argv()
	wd := r.opts.Root
	var full []string
	if cmd.Dir == "" {
		full = append([]string{"sh", "-c", wrapPlain, "sh"}, argv...)
	} else {
		real, err := sandbox.MapPath(r.opts.Root, cmd.Dir)
		if err != nil {
			return nil, err
		}
		full = append([]string{"sh", "-c", wrapDir, "sh", r.opts.Root, real}, argv...)
		wd = "/"
	}
	s, err := r.b.Start(ctx, op, Spec{Argv: full, Env: r.environ(cmd.Env), Dir: wd, Stdin: stdin})
	if err != nil {
		return nil, err
	}
	p := &proc{r: r, op: op, s: s, dir: cmd.Dir,
		ctl: make(chan struct{}), done: make(chan struct{}),
		stdout: stdout, stderr: stderr, closeOut: closeOut}
	go p.pump()
	return p, nil
}

// environ returns the variables a command gets: the sandbox environment
// laid over by the command's own, sorted.
func (r *Runner) environ(cmdEnv map[string]string) []string {
	var base map[string]string
	if r.opts.Env != nil {
		base = r.opts.Env()
	}
	if len(base) == 0 && len(cmdEnv) == 0 {
		return nil
	}
	merged := make(map[string]string, len(base)+len(cmdEnv))
	for k, v := range base {
		merged[k] = v
	}
	for k, v := range cmdEnv {
		merged[k] = v
	}
	out := make([]string, 0, len(merged))
	for k, v := range merged {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// pump copies the output to the sinks until the stream ends.
func (p *proc) pump() {
	cw := &ctlWriter{w: p.stderr, on: p.control}
	err := p.s.Copy(p.stdout, cw)
	_ = p.s.Close()
	cw.finish()
	p.killMu.Lock()
	killed := p.killed
	p.killMu.Unlock()
	if err != nil && killed {
		err = nil // the stream was closed after a kill
	}
	p.streamErr = err
	p.closeOut(err)
	close(p.done)
}

// control handles the wrapper's control line ("" when there was none).
func (p *proc) control(line string) {
	switch {
	case strings.HasPrefix(line, "P"):
		if pid, err := strconv.Atoi(line[1:]); err == nil && pid > 0 {
			p.pid = pid
		}
	case line == "D":
		p.ctlErr = sandbox.Errorf(sandbox.NotFound, p.op, p.dir, "working directory does not exist")
	case line == "N":
		p.ctlErr = sandbox.Errorf(sandbox.InvalidArgument, p.op, p.dir, "working directory is not a directory")
	case line == "X":
		p.ctlErr = sandbox.EscapeError(p.op, p.dir)
	}
	close(p.ctl)
}

// exit reads the exit code once, after the stream ended.
func (p *proc) exit(ctx context.Context) (int, error) {
	p.exitMu.Lock()
	defer p.exitMu.Unlock()
	if p.exitSet {
		return p.exitCode, nil
	}
	code, err := p.s.Exit(ctx)
	if err != nil {
		return -1, err
	}
	p.exitCode, p.exitSet = code, true
	return code, nil
}

// PID returns the process id inside the sandbox.
func (p *proc) PID() int {
	<-p.ctl
	if p.pid == 0 {
		return -1
	}
	return p.pid
}

// Stdout streams standard output.
func (p *proc) Stdout() io.Reader { return p.stdout.(io.Reader) }

// Stderr streams standard error.
func (p *proc) Stderr() io.Reader { return p.stderr.(io.Reader) }

// Stdin writes to the process's standard input; Close sends EOF (a
// half-close where the backend has one) while the output keeps streaming.
func (p *proc) Stdin() io.WriteCloser { return stdinWriter{p} }

type stdinWriter struct{ p *proc }

func (w stdinWriter) Write(b []byte) (int, error) {
	n, err := w.p.s.Write(b)
	if err != nil {
		return n, sandbox.Wrap(sandbox.FailedPrecondition, w.p.op, w.p.r.opts.ID, err)
	}
	return n, nil
}

func (w stdinWriter) Close() error {
	w.p.stdinOnce.Do(func() {
		if err := w.p.s.CloseStdin(); err != nil {
			select {
			case <-w.p.done: // the stream is over; nothing to close
			default:
				w.p.stdinErr = sandbox.Wrap(sandbox.Unavailable, w.p.op, w.p.r.opts.ID, err)
			}
		}
	})
	return w.p.stdinErr
}

// feed copies r to the process's stdin and then closes it.
func (p *proc) feed(r io.Reader) {
	_, _ = io.Copy(stdinWriter{p}, r)
	_ = stdinWriter{p}.Close()
}

// Wait blocks until the process exits and returns its exit code.
func (p *proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return -1, sandbox.Wrap(sandbox.Canceled, p.op, p.r.opts.ID, ctx.Err())
	}
	return p.exit(ctx)
}

// Kill signals the process's group (SIGTERM when sig is zero) with the
// Runner's kill strategy. Killing an exited process is a no-op, and
// concurrent calls share one kill, which runs to its end even if every
// caller gives up.
func (p *proc) Kill(ctx context.Context, sig syscall.Signal) error {
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	p.killMu.Lock()
	ch := p.killing
	if ch == nil {
		ch = make(chan struct{})
		p.killing = ch
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.r.opts.KillGrace+time.Minute)
		go func() {
			defer cancel()
			err := p.kill(kctx, sig)
			p.killMu.Lock()
			p.killErr, p.killing = err, nil
			p.killMu.Unlock()
			close(ch)
		}()
	}
	p.killMu.Unlock()
	select {
	case <-ch:
		p.killMu.Lock()
		defer p.killMu.Unlock()
		return p.killErr
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.Canceled, p.r.op("kill"), p.r.opts.ID, ctx.Err())
	}
}

// streamDrain is how long the stream may take to end after the group is
// gone before it is closed (a docker daemon drains for up to two seconds).
const streamDrain = 3 * time.Second

// kill runs the kill strategy for the process's group and then waits for
// the output stream to end, closing it if the backend does not.
func (p *proc) kill(ctx context.Context, sig syscall.Signal) error {
	select {
	case <-p.ctl:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.Canceled, p.r.op("kill"), p.r.opts.ID, ctx.Err())
	}
	if p.pid == 0 {
		return nil // the wrapper never started the command
	}
	if err := p.r.kill(ctx, p.pid, sig, p.r.opts.KillGrace); err != nil {
		return err
	}
	if sig != syscall.SIGTERM && sig != syscall.SIGKILL {
		return nil
	}
	t := time.NewTimer(streamDrain)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.detach()
	case <-ctx.Done():
	}
	return nil
}

// detach closes the stream on purpose and waits for the pump to end.
func (p *proc) detach() {
	p.killMu.Lock()
	p.killed = true
	p.killMu.Unlock()
	_ = p.s.Close()
	<-p.done
}

// abort kills a command whose caller gave up, in the background of a
// bounded context, and detaches from its stream.
func (p *proc) abort(ctx context.Context) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.r.opts.KillGrace+30*time.Second)
	defer cancel()
	if err := p.Kill(kctx, syscall.SIGTERM); err != nil {
		p.r.log.Warn(p.r.opts.Provider+": killing an abandoned command failed", "id", p.r.opts.ID, "err", err)
	}
	p.detach()
}
