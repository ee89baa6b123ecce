package refcloud

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"syscall"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/internal/execkit"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox.
type handle struct {
	*execkit.Kit // FS, Exec, Spawn, SetEnv; the env is never sent at create
	p            *Provider
	sb           Sandbox
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(sb Sandbox, env map[string]string) *handle {
	h := &handle{p: p, sb: sb}
	var kill execproc.KillFunc
	if p.opts.Kill == KillNativePID {
		kill = execproc.PIDOnly(h.signal, h.alive)
	}
	h.Kit = execkit.New(backend{h}, execproc.Options{Provider: Name, ID: sb.ID, Root: sb.Root,
		KillGrace: p.opts.KillGrace, Kill: kill, Logger: p.log}, env)
	return h
}

// ID returns the backend's sandbox id.
func (h *handle) ID() string { return h.sb.ID }

// Provider returns "refcloud".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the sandbox.
func (h *handle) WorkspaceRoot() string { return h.sb.Root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// ConnectPort is unsupported.
func (h *handle) ConnectPort(context.Context, int) (sandbox.Endpoint, error) {
	return sandbox.Endpoint{}, sandbox.Unsupported(Name, "ports")
}

// Snapshot is unsupported.
func (h *handle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, sandbox.Unsupported(Name, "snapshots")
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy deletes the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.sb.ID) }

func (h *handle) processPath(pid int) string {
	return "/v1/sandboxes/" + url.PathEscape(h.sb.ID) + "/processes/" + strconv.Itoa(pid)
}

// signal is the native kill: POST …/processes/{pid}/signal. A process the
// backend no longer knows is gone, which is success.
func (h *handle) signal(ctx context.Context, pid int, sig syscall.Signal) error {
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".signal", ID: h.sb.ID, Method: http.MethodPost,
		Path: h.processPath(pid) + "/signal", JSON: SignalRequest{Signal: int(sig)}, Idempotent: true}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// alive reports whether the backend says pid still runs.
func (h *handle) alive(ctx context.Context, pid int) (bool, error) {
	st, err := h.status(ctx, pid)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.Running, nil
}

func (h *handle) status(ctx context.Context, pid int) (ProcessStatus, error) {
	var st ProcessStatus
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".process", ID: h.sb.ID, Method: http.MethodGet,
		Path: h.processPath(pid)}, &st)
	return st, err
}
