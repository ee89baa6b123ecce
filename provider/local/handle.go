package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

type handle struct {
	p     *Provider
	id    string
	root  *os.Root
	owned bool
	st    *state

	destroyOnce sync.Once
	destroyErr  error
}

var _ sandbox.Handle = (*handle)(nil)

func (h *handle) ID() string                         { return h.id }
func (h *handle) Provider() string                   { return Name }
func (h *handle) WorkspaceRoot() string              { return h.id }
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.Capabilities() }
func (h *handle) FS() sandbox.FS                     { return &fsys{h: h} }

func (h *handle) ConnectPort(_ context.Context, port int) (sandbox.Endpoint, error) {
	if port <= 0 || port > 65535 {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.InvalidArgument, "local.connect-port", h.id, "port %d is out of range", port)
	}
	return sandbox.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}, nil
}

func (h *handle) SetEnv(_ context.Context, vars map[string]string) error {
	for k := range vars {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return err
		}
	}
	h.st.setEnv(vars)
	return nil
}

func (h *handle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, sandbox.Unsupported(Name, "snapshots")
}

// Fork copies the sandbox directory into a new sandbox under BaseDir, with
// the same environment overlay.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	dir := filepath.Join(h.p.baseDir, "fork-"+randomHex(8))
	if err := os.MkdirAll(h.p.baseDir, 0o755); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "local.fork", h.id, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "local.fork", h.id, err)
	}
	markIdle(dir)
	if err := copyTree(ctx, h.id, dir); err != nil {
		_ = os.RemoveAll(dir)
		return nil, sandbox.Wrap(sandbox.Internal, "local.fork", h.id, err)
	}
	f, err := h.p.open(dir, true)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	f.st.setEnv(h.st.snapshotEnv())
	return f, nil
}

// Destroy kills every process of the sandbox and removes the directory when
// corral created it. Later calls return the first call's result.
func (h *handle) Destroy(ctx context.Context) error {
	h.destroyOnce.Do(func() {
		h.destroyErr = h.p.destroy(ctx, h.id, h.owned)
		_ = h.root.Close()
	})
	return h.destroyErr
}

func (s *state) snapshotEnv() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.env))
	for k, v := range s.env {
		out[k] = v
	}
	return out
}

// Exec runs cmd to completion, capturing its output.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	pr, err := h.start(ctx, "local.exec", cmd, false)
	if err != nil {
		return nil, err
	}
	res := &sandbox.ExecResult{}
	var wg sync.WaitGroup
	outDone := capture(&wg, pr.stdout, cmd.OutputLimit, &res.Stdout, &res.StdoutTruncated)
	errDone := capture(&wg, pr.stderr, cmd.OutputLimit, &res.Stderr, &res.StderrTruncated)
	if cmd.Stdin != nil {
		go func() {
			_, _ = copyStdin(pr.stdin, cmd.Stdin)
			_ = pr.stdin.Close()
		}()
	}
	select {
	case <-pr.done:
	case <-ctx.Done():
		_ = pr.Kill(context.Background(), 0)
		<-pr.done
		pr.closeReaders()
		wg.Wait()
		return nil, sandbox.Wrap(sandbox.Canceled, "local.exec", h.id, ctx.Err())
	}
	// The command has exited. Its output is complete once the pipes reach
	// EOF; a backgrounded child that keeps them open is not waited for
	// longer than pipeDrain — unless output still waits unread in a pipe
	// (the readers are slow, on a loaded machine), which closing the pipe
	// would lose.
	drainAfterExit(time.After, []<-chan struct{}{outDone, errDone}, func() int {
		return pending(pr.stdout) + pending(pr.stderr)
	}, pr.closeReaders)
	wg.Wait()
	res.ExitCode = pr.exitCode
	return res, nil
}

// pipeDrain bounds how long Exec waits for output after the command exits
// while nothing is left unread in its pipes; maxDrain bounds the wait while
// something is (a background child that writes without end).
const (
	pipeDrain = time.Second
	maxDrain  = 30 * time.Second
)

// drainAfterExit waits for every done channel (a pipe read to EOF). Each
// pipeDrain (after) it asks unread: while bytes wait unread it goes on
// waiting, up to maxDrain in all; when none wait (only a background child
// holds the pipes open), or at maxDrain, it calls closeReaders, which ends
// the reads.
func drainAfterExit(after func(time.Duration) <-chan time.Time, dones []<-chan struct{}, unread func() int, closeReaders func()) {
	waited := time.Duration(0)
	tick := after(pipeDrain)
	for _, done := range dones {
		for open := true; open; {
			select {
			case <-done:
				open = false
			case <-tick:
				waited += pipeDrain
				if unread() > 0 && waited < maxDrain {
					tick = after(pipeDrain)
					continue
				}
				closeReaders()
				<-done
				open = false
			}
		}
	}
}

func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	if cmd.Stdin != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "local.spawn", h.id, "Command.Stdin is for Exec; write to Process.Stdin instead")
	}
	pr, err := h.start(ctx, "local.spawn", cmd, true)
	if err != nil {
		return nil, err
	}
	return h.watchSpawned(ctx, cmd, pr), nil
}

// watchSpawned kills a spawned process when ctx ends and after
// cmd.Timeout.
func (h *handle) watchSpawned(ctx context.Context, cmd sandbox.Command, pr *proc) *proc {
	go func() {
		select {
		case <-ctx.Done():
			if err := pr.Kill(context.Background(), 0); err != nil {
				h.p.log.Warn("local: kill on cancel failed", "pgid", pr.pgid, "err", err)
			}
		case <-pr.done:
		}
	}()
	if cmd.Timeout > 0 {
		t := time.AfterFunc(cmd.Timeout, func() { _ = pr.Kill(context.Background(), 0) })
		go func() { <-pr.done; t.Stop() }()
	}
	return pr
}

var _ sandbox.HostPather = (*handle)(nil)

// HostPath maps a sandbox path to the host's: a local sandbox's commands
// run on the host, so an absolute path is the host's own, and a relative
// one is under the sandbox directory.
func (h *handle) HostPath(p string) (string, bool) {
	if p == "" {
		return "", false
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), true
	}
	return filepath.Join(h.id, p), true
}
