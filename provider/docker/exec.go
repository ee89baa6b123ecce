package docker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// How a command is run. Docker cannot signal an exec (only the container's
// PID 1), so every command is wrapped: the wrapper reports its pid as the
// first line of stderr, which the provider strips, and then execs the
// command. A docker exec process leads its own session and process group,
// so that pid is also the group every child and backgrounded grandchild
// belongs to, and Kill signals the group from a second exec.
//
// The control line is one of:
//
//	P<pid>  the command is starting
//	D       Command.Dir does not exist
//	N       Command.Dir is not a directory
//	X       Command.Dir leads outside the workspace through a link
const (
	// wrapPlain runs in the workspace (the exec's WorkingDir).
	wrapPlain = `echo "P$$" >&2; exec "$@"`
)

// wrapDir checks and enters Command.Dir ($2, already mapped under the
// workspace $1) with the shared path guard, then runs the command.
var wrapDir = sandbox.ShellPathGuard + `d=$(corral_resolve "$1" "$2" 1 2>/dev/null && printf x) || { echo X >&2; exit 126; }
d=${d%?x}
if [ ! -e "$d" ]; then echo D >&2; exit 126; fi
if [ ! -d "$d" ]; then echo N >&2; exit 126; fi
cd "$d" || { echo D >&2; exit 126; }
shift 2
echo "P$$" >&2
exec "$@"
`

// killScript signals process group $1 with signal number $2. For SIGTERM
// it waits up to $3 ticks of 50 ms for the group to empty and then sends
// SIGKILL; for SIGTERM and SIGKILL it verifies that the group is gone. It
// prints one word: gone (nothing to signal), sent (a signal that is only
// delivered), ok, or survived.
const killScript = `pg=$1 sig=$2 n=$3
alive() { kill -0 -"$pg" 2>/dev/null || kill -0 "$pg" 2>/dev/null; }
kill -"$sig" -"$pg" 2>/dev/null || kill -"$sig" "$pg" 2>/dev/null || { echo gone; exit 0; }
if [ "$sig" != 15 ] && [ "$sig" != 9 ]; then echo sent; exit 0; fi
i=0
if [ "$sig" = 15 ]; then
  while [ "$i" -lt "$n" ] && alive; do sleep 0.05; i=$((i+1)); done
  if ! alive; then echo ok; exit 0; fi
  kill -9 -"$pg" 2>/dev/null; kill -9 "$pg" 2>/dev/null
fi
i=0
while [ "$i" -lt 100 ] && alive; do sleep 0.05; i=$((i+1)); done
if alive; then echo survived; else echo ok; fi
`

// proc is one wrapped command; it implements sandbox.Process.
type proc struct {
	h      *handle
	op     string
	execID string
	hj     client.HijackedResponse
	dir    string // Command.Dir, for errors

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
// the demultiplexed output; closeOut is called once the stream ends.
func (h *handle) start(ctx context.Context, op string, cmd sandbox.Command, stdin bool, stdout, stderr io.Writer, closeOut func(error)) (*proc, error) {
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, op, h.id, err)
	}
	argv := cmd.Argv()
	wd := h.workdir
	var full []string
	if cmd.Dir == "" {
		full = append([]string{"sh", "-c", wrapPlain, "sh"}, argv...)
	} else {
		real, err := sandbox.MapPath(h.workdir, cmd.Dir)
		if err != nil {
			return nil, err
		}
		full = append([]string{"sh", "-c", wrapDir, "sh", h.workdir, real}, argv...)
		wd = "/"
	}
	execID, hj, err := h.execStart(ctx, op, full, h.environ(cmd.Env), wd, h.user, stdin)
	if err != nil {
		return nil, err
	}
	p := &proc{h: h, op: op, execID: execID, hj: hj, dir: cmd.Dir,
		ctl: make(chan struct{}), done: make(chan struct{}),
		stdout: stdout, stderr: stderr, closeOut: closeOut}
	go p.pump()
	return p, nil
}

// execStart creates an exec and attaches to it.
func (h *handle) execStart(ctx context.Context, op string, argv, env []string, wd, user string, stdin bool) (string, client.HijackedResponse, error) {
	cr, err := h.p.cli.ExecCreate(ctx, h.cid, client.ExecCreateOptions{
		Cmd: argv, Env: env, WorkingDir: wd, User: user,
		AttachStdin: stdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return "", client.HijackedResponse{}, h.execError(op, err)
	}
	ar, err := h.p.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return "", client.HijackedResponse{}, h.execError(op, err)
	}
	return cr.ID, ar.HijackedResponse, nil
}

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

// pump copies the multiplexed output to the sinks until the stream ends.
func (p *proc) pump() {
	cw := &ctlWriter{w: p.stderr, on: p.control}
	_, err := stdcopy.StdCopy(p.stdout, cw, p.hj.Reader)
	cw.finish()
	p.killMu.Lock()
	killed := p.killed
	p.killMu.Unlock()
	if err != nil && killed {
		err = nil // the connection was closed after a kill
	}
	p.streamErr = err
	p.closeOut(err)
	p.hj.Close()
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

// ctlWriter passes stderr through after taking the first line off it.
type ctlWriter struct {
	w    io.Writer
	on   func(string)
	buf  []byte
	done bool
}

const maxCtlLine = 24

func (c *ctlWriter) Write(b []byte) (int, error) {
	n := len(b)
	if !c.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 && len(c.buf)+len(b) <= maxCtlLine {
			c.buf = append(c.buf, b...)
			return n, nil
		}
		if i < 0 || len(c.buf)+i > maxCtlLine {
			// Not the wrapper's line: the wrapper never ran.
			c.done = true
			c.on("")
			pending := append(c.buf, b...)
			c.buf = nil
			if _, err := c.w.Write(pending); err != nil {
				return 0, err
			}
			return n, nil
		}
		line := string(append(c.buf, b[:i]...))
		c.buf = nil
		c.done = true
		c.on(line)
		b = b[i+1:]
	}
	if len(b) > 0 {
		if _, err := c.w.Write(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// finish ends the control phase at the end of the stream.
func (c *ctlWriter) finish() {
	if c.done {
		return
	}
	c.done = true
	c.on("")
	if len(c.buf) > 0 {
		_, _ = c.w.Write(c.buf)
	}
}

// PID returns the process id inside the container.
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

// Stdin writes to the process's standard input; Close half-closes the
// connection so that the process reads EOF while its output keeps
// streaming.
func (p *proc) Stdin() io.WriteCloser { return stdinWriter{p} }

type stdinWriter struct{ p *proc }

func (w stdinWriter) Write(b []byte) (int, error) {
	n, err := w.p.hj.Conn.Write(b)
	if err != nil {
		return n, sandbox.Wrap(sandbox.FailedPrecondition, w.p.op, w.p.h.id, err)
	}
	return n, nil
}

func (w stdinWriter) Close() error {
	w.p.stdinOnce.Do(func() {
		if err := w.p.hj.CloseWrite(); err != nil {
			select {
			case <-w.p.done: // the stream is over; nothing to close
			default:
				w.p.stdinErr = sandbox.Wrap(sandbox.Unavailable, w.p.op, w.p.h.id, err)
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
		return -1, sandbox.Wrap(sandbox.Canceled, p.op, p.h.id, ctx.Err())
	}
	p.exitMu.Lock()
	defer p.exitMu.Unlock()
	if p.exitSet {
		return p.exitCode, nil
	}
	code, err := p.h.exitCode(ctx, p.op, p.execID)
	if err != nil {
		return -1, err
	}
	p.exitCode, p.exitSet = code, true
	return code, nil
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

// Kill signals the process's group (SIGTERM when sig is zero). For
// SIGTERM it escalates to SIGKILL after Options.KillGrace; for SIGTERM and
// SIGKILL it returns once the group is gone. Killing an exited process is
// a no-op, and concurrent calls share one kill.
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
		// The kill runs to its end even if every caller gives up.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.h.p.opts.KillGrace+time.Minute)
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
		return sandbox.Wrap(sandbox.Canceled, "docker.kill", p.h.id, ctx.Err())
	}
}

// kill runs the kill script for the process's group and then waits for
// the output stream to end, closing it if the daemon does not.
func (p *proc) kill(ctx context.Context, sig syscall.Signal) error {
	select {
	case <-p.ctl:
	case <-p.done:
		return nil
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.Canceled, "docker.kill", p.h.id, ctx.Err())
	}
	if p.pid == 0 {
		return nil // the wrapper never started the command
	}
	ticks := int(p.h.p.opts.KillGrace / (50 * time.Millisecond))
	res, err := p.h.run(ctx, "docker.kill", []string{"sh", "-c", killScript, "sh",
		strconv.Itoa(p.pid), strconv.Itoa(int(sig)), strconv.Itoa(ticks)}, nil, p.h.user)
	if err != nil {
		return err
	}
	word := strings.TrimSpace(string(res.Stdout))
	if word == "survived" {
		p.h.p.log.Warn("docker: processes survived SIGKILL", "id", p.h.id, "pid", p.pid)
		return sandbox.Errorf(sandbox.Internal, "docker.kill", p.h.id, "process group %d survived SIGKILL", p.pid)
	}
	if word != "ok" && word != "gone" && word != "sent" {
		return sandbox.Errorf(sandbox.Internal, "docker.kill", p.h.id, "kill script failed (exit %d): %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	if word == "sent" {
		return nil
	}
	// The daemon ends the stream once the process is reaped (after at most
	// two seconds of draining); past that, stop reading.
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		p.killMu.Lock()
		p.killed = true
		p.killMu.Unlock()
		p.hj.Close()
		<-p.done
	case <-ctx.Done():
	}
	return nil
}

// abort kills a command whose caller gave up, in the background of a
// bounded context, and detaches from its stream.
func (p *proc) abort(ctx context.Context) {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.h.p.opts.KillGrace+30*time.Second)
	defer cancel()
	if err := p.Kill(kctx, syscall.SIGTERM); err != nil {
		p.h.p.log.Warn("docker: killing an abandoned command failed", "id", p.h.id, "err", err)
	}
	p.killMu.Lock()
	p.killed = true
	p.killMu.Unlock()
	p.hj.Close()
	<-p.done
}

// Exec runs a command to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	stdout := &capBuf{limit: cmd.OutputLimit}
	stderr := &capBuf{limit: cmd.OutputLimit}
	p, err := h.start(ctx, "docker.exec", cmd, cmd.Stdin != nil, stdout, stderr, func(error) {})
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
		return nil, sandbox.Wrap(sandbox.Canceled, "docker.exec", h.id, ctx.Err())
	}
	if p.ctlErr != nil {
		return nil, p.ctlErr
	}
	if p.streamErr != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, "docker.exec", h.id, p.streamErr)
	}
	code, err := h.exitCode(ctx, "docker.exec", p.execID)
	if err != nil {
		return nil, err
	}
	if p.pid == 0 {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, "docker.exec", h.id,
			"the command wrapper could not start (exit %d); the image needs a POSIX sh: %s", code, strings.TrimSpace(string(stderr.buf.Bytes())))
	}
	return &sandbox.ExecResult{
		ExitCode:        code,
		Stdout:          stdout.buf.Bytes(),
		Stderr:          stderr.buf.Bytes(),
		StdoutTruncated: stdout.truncated,
		StderrTruncated: stderr.truncated,
	}, nil
}

// Spawn starts a command and returns once it runs (its PID is known).
// Cancelling ctx, or Command.Timeout passing, kills it. Output the caller
// does not read is buffered in memory.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	if cmd.Stdin != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.spawn", h.id, "Command.Stdin is for Exec; write to Process.Stdin instead")
	}
	stdout, stderr := newBufPipe(), newBufPipe()
	closeOut := func(err error) {
		stdout.closeWithError(err)
		stderr.closeWithError(err)
	}
	p, err := h.start(ctx, "docker.spawn", cmd, true, stdout, stderr, closeOut)
	if err != nil {
		return nil, err
	}
	select {
	case <-p.ctl:
	case <-ctx.Done():
		p.abort(ctx)
		return nil, sandbox.Wrap(sandbox.Canceled, "docker.spawn", h.id, ctx.Err())
	}
	if p.ctlErr != nil {
		<-p.done
		return nil, p.ctlErr
	}
	if p.pid == 0 {
		<-p.done
		code, _ := h.exitCode(ctx, "docker.spawn", p.execID)
		msg, _ := io.ReadAll(stderr)
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, "docker.spawn", h.id,
			"the command wrapper could not start (exit %d); the image needs a POSIX sh: %s", code, strings.TrimSpace(string(msg)))
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
		kctx, cancel := context.WithTimeout(context.Background(), h.p.opts.KillGrace+time.Minute)
		defer cancel()
		if err := p.Kill(kctx, syscall.SIGTERM); err != nil {
			h.p.log.Warn("docker: killing a cancelled process failed", "id", h.id, "pid", p.pid, "err", err)
		}
	})
	go func() {
		<-p.done
		stop()
	}()
	return p, nil
}

// run executes argv unwrapped, with no environment, from "/", feeding it
// stdin, and returns its complete output. It serves the file system and
// the kill script. user overrides the container's user when set.
func (h *handle) run(ctx context.Context, op string, argv []string, stdin io.Reader, user string) (*sandbox.ExecResult, error) {
	execID, hj, err := h.execStart(ctx, op, argv, nil, "/", user, stdin != nil)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(&stdout, &stderr, hj.Reader)
		copied <- err
	}()
	if stdin != nil {
		go func() {
			_, _ = io.Copy(hj.Conn, stdin)
			_ = hj.CloseWrite()
		}()
	}
	select {
	case err = <-copied:
		hj.Close()
	case <-ctx.Done():
		hj.Close()
		<-copied
		return nil, sandbox.Wrap(sandbox.Canceled, op, h.id, ctx.Err())
	}
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, op, h.id, err)
	}
	code, err := h.exitCode(ctx, op, execID)
	if err != nil {
		return nil, err
	}
	return &sandbox.ExecResult{ExitCode: code, Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// capBuf keeps up to limit bytes (all when limit is 0) and notes the
// rest was dropped.
type capBuf struct {
	buf       bytes.Buffer
	limit     int
	truncated bool
}

func (c *capBuf) Write(b []byte) (int, error) {
	if c.limit > 0 {
		room := c.limit - c.buf.Len()
		if len(b) > room {
			c.truncated = true
			c.buf.Write(b[:max(room, 0)])
			return len(b), nil
		}
	}
	return c.buf.Write(b)
}

// spawnBuffer bounds what a spawned process's stdout or stderr holds
// while the caller has not read it. A process that writes more than that
// to one stream waits until the caller reads (or closes the stream), as it
// would on a pipe, only with a bigger buffer; the other stream, sharing the
// exec's one connection, waits with it.
const spawnBuffer = 4 << 20

// bufPipe is an in-memory pipe between the exec's output demultiplexer
// (the writer) and the caller. The writer blocks while limit bytes are
// unread; Close makes the pipe drop what it is given from then on.
type bufPipe struct {
	mu      sync.Mutex
	cond    sync.Cond
	buf     bytes.Buffer
	limit   int
	closed  bool // the writer is done
	discard bool // the reader is done
	err     error
}

func newBufPipe() *bufPipe {
	b := &bufPipe{limit: spawnBuffer}
	b.cond.L = &b.mu
	return b
}

func (b *bufPipe) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() >= b.limit && !b.closed && !b.discard {
		b.cond.Wait()
	}
	if b.closed {
		return 0, io.ErrClosedPipe
	}
	if b.discard {
		return len(p), nil
	}
	b.buf.Write(p)
	b.cond.Broadcast()
	return len(p), nil
}

func (b *bufPipe) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.buf.Len() == 0 && !b.closed && !b.discard {
		b.cond.Wait()
	}
	if b.discard {
		return 0, io.ErrClosedPipe
	}
	if b.buf.Len() > 0 {
		n, err := b.buf.Read(p)
		b.cond.Broadcast() // room for the writer
		return n, err
	}
	return 0, b.err
}

// Close is the reader's: it will read no more, and the writer's output is
// dropped from now on so the other stream keeps flowing.
func (b *bufPipe) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.discard = true
	b.buf = bytes.Buffer{}
	b.cond.Broadcast()
	return nil
}

func (b *bufPipe) closeWithError(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	if err == nil {
		err = io.EOF
	}
	b.closed, b.err = true, err
	b.cond.Broadcast()
}
