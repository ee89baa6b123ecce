package railway

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one Railway sandbox.
type handle struct {
	p    *Provider
	id   string
	info SandboxInfo
	root string
	fs   sandbox.FS
	run  *execproc.Runner
	env  *execproc.Env // create env, then SetEnv overlays; never sent as create-time variables
	made bool          // the root was made by open

	mu   sync.Mutex
	live int           // spawned processes not yet waited for
	stop chan struct{} // ends the heartbeat loop
}

var _ sandbox.Handle = (*handle)(nil)

// open builds the handle; a workdir under "~/" is resolved with one
// command.
func (p *Provider) open(ctx context.Context, op string, info SandboxInfo, env map[string]string) (*handle, error) {
	h := &handle{p: p, id: info.ID, info: info, env: execproc.NewEnv(env), root: p.opts.Workdir}
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: h.id, Root: "/",
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	if rest, ok := strings.CutPrefix(p.opts.Workdir, "~/"); ok {
		// One command makes the root and says where $HOME is.
		res, err := h.run.Run(ctx, op, []string{"sh", "-c", `mkdir -p "$HOME/$1" && printf %s "$HOME"`, "sh", rest}, nil, "")
		if err != nil {
			return nil, err
		}
		if res.ExitCode != 0 || len(res.Stdout) == 0 {
			return nil, sandbox.Errorf(sandbox.Internal, op, h.id, "railway: cannot read $HOME in the sandbox (exit %d)", res.ExitCode)
		}
		h.root = strings.TrimRight(string(res.Stdout), "/") + "/" + rest
		h.made = true
	}
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: h.id, Root: h.root,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	h.fs = execfs.New(h.fsRun, execfs.Options{Root: h.root, Provider: Name})
	return h, nil
}

// fsRun is execfs's Runner.
func (h *handle) fsRun(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run.Run(ctx, Name+".fs", cmd.Argv(), cmd.Stdin, "")
}

func (h *handle) mkdirRoot(ctx context.Context, op string) error {
	if h.made {
		return nil
	}
	res, err := h.run.Run(ctx, op, []string{"mkdir", "-p", h.root}, nil, "")
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, op, h.id, "railway: mkdir %s: %s", h.root, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// ID returns the sandbox's opaque id.
func (h *handle) ID() string { return h.id }

// Provider returns "railway".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the sandbox.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the file system (exec-backed: the path guard runs in the
// sandbox).
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run.Exec(ctx, cmd)
}

// Spawn starts cmd; while it is live the handle heartbeats the sandbox so
// its idle clock does not destroy it under a run.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	pr, err := h.run.Spawn(ctx, cmd)
	if err != nil {
		return nil, err
	}
	h.beatStart()
	return &process{Process: pr, h: h}, nil
}

// process ends the heartbeat once waited for.
type process struct {
	sandbox.Process
	h    *handle
	once sync.Once
}

// Wait waits for the process and releases its hold on the heartbeat.
func (p *process) Wait(ctx context.Context) (int, error) {
	code, err := p.Process.Wait(ctx)
	if err == nil || ctx.Err() == nil {
		p.once.Do(p.h.beatDone)
	}
	return code, err
}

// Kill kills the process tree (TERM, the grace, KILL, verified).
func (p *process) Kill(ctx context.Context, sig syscall.Signal) error {
	return p.Process.Kill(ctx, sig)
}

func (h *handle) beatStart() {
	if h.p.opts.Heartbeat <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live++
	if h.live > 1 {
		return
	}
	stop := make(chan struct{})
	h.stop = stop
	go func() {
		t := time.NewTicker(h.p.opts.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := h.heartbeat(ctx); err != nil {
					h.p.log.Debug("railway heartbeat failed", "sandbox", h.id, "err", err)
				}
				cancel()
			}
		}
	}()
}

func (h *handle) beatDone() {
	if h.p.opts.Heartbeat <= 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.live--
	if h.live == 0 && h.stop != nil {
		close(h.stop)
		h.stop = nil
	}
}

// ConnectPort is unsupported (Railway sandboxes publish no ports through
// this API version).
func (h *handle) ConnectPort(context.Context, int) (sandbox.Endpoint, error) {
	return sandbox.Endpoint{}, sandbox.Unsupported(Name, "ports")
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot captures the sandbox's disk into a checkpoint named
// corral-<id>-<random> (names are environment-scoped; the label stays on
// the returned ref). The checkpoint is bootable when this returns and
// outlives the sandbox.
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	id := h.id
	if len(id) > 8 {
		id = id[:8]
	}
	name := CheckpointPrefix + id + "-" + randomHex(6)
	var ans struct {
		C CheckpointInfo `json:"sandboxCheckpointCreate"`
	}
	if err := h.p.gql(ctx, Name+".snapshot", h.id, mCheckpoint, map[string]any{"environmentId": h.p.env(), "name": name, "sandboxId": h.id}, false, &ans); err != nil {
		return sandbox.Snapshot{}, err
	}
	return sandbox.Snapshot{ID: ans.C.Key, Label: label, SandboxID: h.id, CreatedAt: time.Now().UTC()}, nil
}

// Fork makes a live disk fork of the sandbox in the same environment
// (processes are not copied); the env overlay is carried over.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	return h.p.create(ctx, Name+".fork", sandbox.CreateOptions{Env: h.env.Copy()}, CreateInput{SourceSandboxID: h.id})
}

// Destroy destroys the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.id) }
