package fakecloud

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/provider/local"
)

// KillMode is what a backend's native kill reaches.
type KillMode int

// Kill semantics (see the package doc).
const (
	// GroupKill signals the process group.
	GroupKill KillMode = iota
	// PIDOnly signals one pid; a backgrounded grandchild survives.
	PIDOnly
	// KillOnDisconnect signals one pid, and SIGKILLs the group when the
	// process's stream connection drops.
	KillOnDisconnect
)

// String returns the mode's name.
func (m KillMode) String() string {
	switch m {
	case GroupKill:
		return "group"
	case PIDOnly:
		return "pid-only"
	case KillOnDisconnect:
		return "kill-on-disconnect"
	}
	return fmt.Sprintf("KillMode(%d)", int(m))
}

// DefaultPath is PATH in the minimal default environment.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Spec is one command to start, taken verbatim.
type Spec struct {
	// Argv is the program and its arguments.
	Argv []string
	// Env entries (KEY=VALUE) are laid over the default environment.
	Env []string
	// Dir is the absolute working directory; "" is the sandbox's Root.
	Dir string
	// Stdin gives the process a stdin pipe; otherwise it reads /dev/null.
	Stdin bool
}

// ErrSandboxGone is Start's error for a deleted sandbox.
var ErrSandboxGone = errors.New("the sandbox is gone")

// Proc is one process started in a sandbox.
type Proc struct {
	sb     *Sandbox
	pid    int
	cmd    *exec.Cmd
	stdout *os.File
	stderr *os.File
	stdin  *os.File // nil without Spec.Stdin

	stdinOnce sync.Once
	done      chan struct{}
	code      int       // valid after done
	ended     time.Time // valid after done
}

// Start starts spec in the sandbox: a new session (the pid leads its own
// process group), the default environment (PATH, HOME, LANG,
// CORRAL_SANDBOX_ID) laid over by spec.Env. A relative or missing Dir is
// an error; a program that is not found exits 127.
func (sb *Sandbox) Start(spec Spec) (*Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty argv")
	}
	dir := spec.Dir
	if dir == "" {
		dir = sb.Root
	}
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("working directory %q is not absolute", dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("working directory %q does not exist", dir)
	}
	env := sb.environ(spec.Env)
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeFiles(stdoutR, stdoutW)
		return nil, err
	}
	p := &Proc{sb: sb, stdout: stdoutR, stderr: stderrR, done: make(chan struct{})}
	var stdinR *os.File
	if spec.Stdin {
		if stdinR, p.stdin, err = os.Pipe(); err != nil {
			closeFiles(stdoutR, stdoutW, stderrR, stderrW)
			return nil, err
		}
	}
	prog, lookErr := local.LookPath(spec.Argv[0], env)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.gone {
		closeFiles(stdoutR, stdoutW, stderrR, stderrW, stdinR, p.stdin)
		return nil, ErrSandboxGone
	}
	if lookErr != nil {
		// As a shell reports it: exit 127 with a message.
		go func() {
			_, _ = io.WriteString(stderrW, spec.Argv[0]+": command not found\n")
			closeFiles(stdoutW, stderrW, stdinR)
		}()
		p.pid, p.code, p.ended = -1, 127, time.Now()
		close(p.done)
		return p, nil
	}
	c := &exec.Cmd{Path: prog, Args: spec.Argv, Env: env, Dir: dir,
		Stdout: stdoutW, Stderr: stderrW, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if stdinR != nil {
		c.Stdin = stdinR
	}
	if err := c.Start(); err != nil {
		closeFiles(stdoutR, stdoutW, stderrR, stderrW, stdinR, p.stdin)
		return nil, err
	}
	closeFiles(stdoutW, stderrW, stdinR)
	p.cmd, p.pid = c, c.Process.Pid
	sb.prune()
	sb.procs[p.pid] = p
	go p.reap()
	return p, nil
}

// prune forgets processes that ended more than a minute ago (their exit
// codes were there to be asked for). sb.mu is held.
func (sb *Sandbox) prune() {
	cutoff := time.Now().Add(-time.Minute)
	for pid, p := range sb.procs {
		if p.Exited() && p.ended.Before(cutoff) {
			delete(sb.procs, pid)
		}
	}
}

func (sb *Sandbox) environ(extra []string) []string {
	vars := map[string]string{"PATH": DefaultPath, "HOME": sb.Home, "LANG": "C.UTF-8"}
	order := []string{"PATH", "HOME", "LANG"}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	out := make([]string, 0, len(order)+1)
	for _, k := range order {
		if k != local.SandboxIDEnv {
			out = append(out, k+"="+vars[k])
		}
	}
	return append(out, local.SandboxIDEnv+"="+sb.Dir)
}

func (p *Proc) reap() {
	err := p.cmd.Wait()
	code := -1
	if ps := p.cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		} else {
			code = ps.ExitCode()
		}
	} else if err != nil {
		code = -1
	}
	p.code, p.ended = code, time.Now()
	close(p.done)
}

// PID returns the process id on the host (-1 for a program that was not
// found).
func (p *Proc) PID() int { return p.pid }

// Stdout returns the read end of its stdout; EOF once every holder of the
// write end (it and what it started) is gone.
func (p *Proc) Stdout() io.ReadCloser { return p.stdout }

// Stderr returns the read end of its stderr.
func (p *Proc) Stderr() io.ReadCloser { return p.stderr }

// WriteStdin writes to its stdin.
func (p *Proc) WriteStdin(b []byte) (int, error) {
	if p.stdin == nil {
		return 0, errors.New("the process has no stdin")
	}
	return p.stdin.Write(b)
}

// CloseStdin sends EOF on its stdin.
func (p *Proc) CloseStdin() {
	p.stdinOnce.Do(func() {
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
	})
}

// Done is closed once the process exited and was reaped.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// ExitCode returns the exit code (128+N for signal N) once Done is
// closed, else -1.
func (p *Proc) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.code
}

// Signal sends sig the way the server's kill mode says: to the process
// group (GroupKill) or to the one pid (PIDOnly, KillOnDisconnect). A
// process that has exited is not signalled.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.pid <= 0 || p.Exited() {
		return nil
	}
	target := p.pid
	if p.sb.s.opts.Kill == GroupKill {
		target = -p.pid
	}
	if err := syscall.Kill(target, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Disconnected tells the process that the connection streaming it has
// dropped: under KillOnDisconnect its group gets SIGKILL; otherwise it
// runs on.
func (p *Proc) Disconnected() {
	if p.sb.s.opts.Kill == KillOnDisconnect && p.pid > 0 {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
}

// Release closes the host's ends of its pipes (after its stream ended).
func (p *Proc) Release() {
	p.CloseStdin()
	closeFiles(p.stdout, p.stderr)
}

func closeFiles(fs ...*os.File) {
	for _, f := range fs {
		if f != nil {
			_ = f.Close()
		}
	}
}
