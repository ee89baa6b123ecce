package cloudflare

import (
	"context"
	"net/http"
	"net/url"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/internal/execkit"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox.
type handle struct {
	*execkit.Kit // FS, Exec, Spawn; the env is never sent at create
	p            *Provider
	sb           Sandbox
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(sb Sandbox, env map[string]string) *handle {
	h := &handle{p: p, sb: sb}
	// The kill is execproc's group kill: a kill script run through the
	// exec WebSocket as a second command. The bridge starts every command
	// under setsid, so the wrapper's pid leads the command's group.
	h.Kit = execkit.New(backend{h}, execproc.Options{Provider: Name, ID: sb.ID, Root: sb.Root,
		KillGrace: p.opts.KillGrace, Logger: p.log}, env)
	return h
}

// ID returns the sandbox's id (its Durable Object name).
func (h *handle) ID() string { return h.sb.ID }

// Provider returns "cloudflare".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the container.
func (h *handle) WorkspaceRoot() string { return h.sb.Root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// ConnectPort is unsupported: the SDK's exposePort needs a custom domain
// with wildcard DNS, which a bridge on workers.dev does not have.
func (h *handle) ConnectPort(context.Context, int) (sandbox.Endpoint, error) {
	return sandbox.Endpoint{}, sandbox.Unsupported(Name, "ports")
}

// SetEnv merges vars into every later command's environment (the values
// travel with each command) and hands them to the sandbox itself through
// the bridge's env call (the SDK's setEnvVars), as the reference does.
func (h *handle) SetEnv(ctx context.Context, vars map[string]string) error {
	if err := h.Env().Set(vars); err != nil {
		return err
	}
	if len(vars) == 0 {
		return nil
	}
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".env", ID: h.sb.ID, Method: http.MethodPost,
		Path: "/v1/sandboxes/" + url.PathEscape(h.sb.ID) + "/env", JSON: EnvRequest{Env: vars}, Idempotent: true}, nil)
	return err
}

// Snapshot is unsupported.
func (h *handle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, sandbox.Unsupported(Name, "snapshots")
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy destroys the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.sb.ID) }
