package local

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// proc is one command started in a sandbox; it implements sandbox.Process.
type proc struct {
	h      *handle
	cmd    *exec.Cmd
	pgid   int
	stdout *os.File
	stderr *os.File
	stdin  *os.File

	done     chan struct{} // closed once the leader has exited and been reaped
	exitCode int           // valid after done

	killMu  sync.Mutex
	killing *killState // non-nil while a kill runs
}

var _ sandbox.Process = (*proc)(nil)

// start validates cmd and starts it in its own process group. withStdin
// gives the process a stdin pipe even when cmd.Stdin is nil.
func (h *handle) start(ctx context.Context, op string, cmd sandbox.Command, withStdin bool) (*proc, error) {
	return h.startIn(ctx, op, cmd, withStdin, -1)
}

// startIn is start with the process born in the cgroup v2 directory open
// as cgroupFD (-1: in this process's own).
func (h *handle) startIn(ctx context.Context, op string, cmd sandbox.Command, withStdin bool, cgroupFD int) (*proc, error) {
	if err := cmd.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, op, h.id, err)
	}
	dir := h.id
	if cmd.Dir != "" {
		rel, _ := sandbox.CleanPath(cmd.Dir)
		fi, err := h.root.Stat(rel)
		if err != nil {
			return nil, fsError(op, cmd.Dir, err)
		}
		if !fi.IsDir() {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, op, cmd.Dir, "working directory is not a directory")
		}
		dir = filepath.Join(h.id, rel)
	}
	env := h.environ(cmd.Env)
	argv := cmd.Argv()
	prog, lookErr := LookPath(argv[0], env)

	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, sandbox.Wrap(sandbox.ResourceExhausted, op, h.id, err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdoutR, stdoutW)
		return nil, sandbox.Wrap(sandbox.ResourceExhausted, op, h.id, err)
	}
	pr := &proc{h: h, stdout: stdoutR, stderr: stderrR, done: make(chan struct{})}
	if lookErr != nil {
		// Report a missing program the way a shell does: exit 127 with a
		// message on stderr, so every provider reads the same.
		go func() {
			_, _ = io.WriteString(stderrW, "corral: "+argv[0]+": command not found\n")
			closeAll(stdoutW, stderrW)
		}()
		pr.exitCode, pr.pgid = 127, -1
		if withStdin || cmd.Stdin != nil {
			r, w, _ := os.Pipe()
			_ = r.Close()
			pr.stdin = w
		}
		close(pr.done)
		return pr, nil
	}
	c := &exec.Cmd{
		Path:        prog,
		Args:        argv,
		Env:         env,
		Dir:         dir,
		Stdout:      stdoutW,
		Stderr:      stderrW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if cgroupFD >= 0 {
		intoCgroup(c.SysProcAttr, cgroupFD)
	}
	var stdinR *os.File
	if withStdin || cmd.Stdin != nil {
		stdinR, pr.stdin, err = os.Pipe()
		if err != nil {
			closeAll(stdoutR, stdoutW, stderrR, stderrW)
			return nil, sandbox.Wrap(sandbox.ResourceExhausted, op, h.id, err)
		}
		c.Stdin = stdinR
	}
	if err := h.st.markRan(h.id); err != nil {
		closeAll(stdoutR, stdoutW, stderrR, stderrW, stdinR, pr.stdin)
		return nil, sandbox.Wrap(sandbox.Internal, op, h.id, err)
	}
	if err := c.Start(); err != nil {
		closeAll(stdoutR, stdoutW, stderrR, stderrW, stdinR, pr.stdin)
		if cgroupFD >= 0 {
			// clone3 refused (an old kernel, a cgroup gone or not
			// writable): the caller spawns as usual.
			return nil, sandbox.Wrap(sandbox.Unimplemented, op, h.id, err)
		}
		return nil, sandbox.Wrap(sandbox.Internal, op, h.id, err)
	}
	closeAll(stdoutW, stderrW, stdinR)
	pr.cmd, pr.pgid = c, c.Process.Pid
	h.st.track(pr)
	go pr.reap()
	return pr, nil
}

func (pr *proc) reap() {
	err := pr.cmd.Wait()
	pr.exitCode = exitCode(pr.cmd.ProcessState, err)
	close(pr.done)
}

func exitCode(ps *os.ProcessState, err error) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func (pr *proc) finished() bool {
	select {
	case <-pr.done:
		return true
	default:
		return false
	}
}

func (pr *proc) PID() int          { return pr.pgid }
func (pr *proc) Stdout() io.Reader { return pr.stdout }
func (pr *proc) Stderr() io.Reader { return pr.stderr }

func (pr *proc) Stdin() io.WriteCloser {
	if pr.stdin == nil {
		return closedStdin{}
	}
	return pr.stdin
}

func (pr *proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-pr.done:
		return pr.exitCode, nil
	case <-ctx.Done():
		return -1, sandbox.Wrap(sandbox.Canceled, "local.wait", pr.h.id, ctx.Err())
	}
}

// Kill signals the process group. For SIGTERM (or zero) it escalates to
// SIGKILL after the provider's grace period and returns once no live
// process is left in the group. Concurrent calls share one kill.
func (pr *proc) Kill(ctx context.Context, sig syscall.Signal) error {
	if pr.pgid <= 0 {
		return nil
	}
	pr.killMu.Lock()
	if k := pr.killing; k != nil {
		pr.killMu.Unlock()
		select {
		case <-k.done:
			return k.err
		case <-ctx.Done():
			return sandbox.Wrap(sandbox.Canceled, "local.kill", pr.h.id, ctx.Err())
		}
	}
	k := &killState{done: make(chan struct{})}
	pr.killing = k
	pr.killMu.Unlock()

	if err := killGroup(ctx, pr.pgid, sig, pr.h.p.opts.KillGrace, pr.done); err != nil {
		k.err = sandbox.Wrap(sandbox.Internal, "local.kill", pr.h.id, err)
	}
	pr.killMu.Lock()
	pr.killing = nil
	pr.killMu.Unlock()
	close(k.done) // k.err is set before, so every waiter reads it safely
	return k.err
}

// killState is one kill that concurrent callers share: its error is
// written once, before done is closed.
type killState struct {
	done chan struct{}
	err  error
}

// killGroup sends sig to the group. Unless sig is a plain signal other than
// TERM and KILL (which is only delivered), it then waits for the group to
// empty, sending SIGKILL after grace.
func killGroup(ctx context.Context, pgid int, sig syscall.Signal, grace time.Duration, leaderDone <-chan struct{}) error {
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	// The leader's descendants, found before the signal scatters them, are
	// the members the wait watches one by one (see waitGroupGone).
	var known []int
	select {
	case <-leaderDone:
	default:
		if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
			known = descendants(pgid)
		}
	}
	if err := syscall.Kill(-pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	if sig != syscall.SIGTERM && sig != syscall.SIGKILL {
		return nil
	}
	if sig == syscall.SIGTERM && waitGroupGone(ctx, pgid, grace, leaderDone, &known) {
		return nil
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if waitGroupGone(ctx, pgid, 5*time.Second, leaderDone, &known) {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("processes survived SIGKILL")
}

// waitGroupGone polls until the group has no live member, up to limit.
// Until the leader (our child) is reaped the group counts as alive, which
// is right: it is.
//
// After that the group is gone once kill(-pgid, 0) fails with ESRCH. A
// zombie keeps that from happening until its new parent reaps it (which
// some inits do only every few seconds), so the wait also watches the
// members it knows (*known: the leader's descendants at the signal, and
// the live members the last scan found) by their /proc stat lines, and
// scans all of /proc (groupLive, which skips zombies) only when every known
// member is dead: that scan finds members that had left the leader's tree
// (orphans of a subshell) and decides.
func waitGroupGone(ctx context.Context, pgid int, limit time.Duration, leaderDone <-chan struct{}, known *[]int) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	select {
	case <-leaderDone:
	case <-deadline.C:
		return false
	case <-ctx.Done():
		return false
	}
	interval, scanGap := 20*time.Microsecond, time.Duration(0)
	var lastScan time.Time
	for groupMember(pgid) {
		if *known = liveAmong(pgid, *known); len(*known) == 0 {
			if now := time.Now(); now.Sub(lastScan) >= scanGap {
				if *known = groupLive(pgid); len(*known) == 0 {
					return true
				}
				lastScan, scanGap = now, min(max(2*scanGap, time.Millisecond), 20*time.Millisecond)
			}
		}
		select {
		case <-time.After(interval):
		case <-deadline.C:
			return false
		case <-ctx.Done():
			return false
		}
		interval = min(2*interval, time.Millisecond)
	}
	return true
}

// groupMember reports whether process group pgid has any member, zombies
// included.
func groupMember(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

func (pr *proc) closeReaders() { closeAll(pr.stdout, pr.stderr) }

func (h *handle) environ(cmdEnv map[string]string) []string {
	scrub := make(map[string]bool, len(h.p.opts.ScrubEnv))
	for _, k := range h.p.opts.ScrubEnv {
		scrub[k] = true
	}
	merged := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if !scrub[k] {
			merged[k] = v
		}
	}
	h.st.mu.Lock()
	for k, v := range h.st.env {
		merged[k] = v
	}
	h.st.mu.Unlock()
	for k, v := range cmdEnv {
		merged[k] = v
	}
	merged[SandboxIDEnv] = h.id
	env := make([]string, 0, len(merged))
	for k, v := range merged {
		env = append(env, k+"="+v)
	}
	return env
}

// LookPath finds prog on the PATH of env (KEY=VALUE entries), not on the
// PATH of the corral process as exec.LookPath would: a program named with
// a slash is returned as it is; a missing one is exec.ErrNotFound.
func LookPath(prog string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// capture reads r into *dst (keeping at most limit bytes when limit > 0,
// and discarding the rest) until EOF; the returned channel closes when it
// is done.
func capture(wg *sync.WaitGroup, r io.Reader, limit int, dst *[]byte, truncated *bool) <-chan struct{} {
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		var buf bytes.Buffer
		if limit > 0 {
			_, _ = buf.ReadFrom(io.LimitReader(r, int64(limit)))
			if n, _ := io.Copy(io.Discard, r); n > 0 {
				*truncated = true
			}
		} else {
			_, _ = buf.ReadFrom(r)
		}
		*dst = buf.Bytes()
	}()
	return done
}

func copyStdin(w io.Writer, r io.Reader) (int64, error) { return io.Copy(w, r) }

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// closedStdin is the stdin of a process that has none.
type closedStdin struct{}

func (closedStdin) Write([]byte) (int, error) { return 0, os.ErrClosed }
func (closedStdin) Close() error              { return nil }
