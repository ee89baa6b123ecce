package kubernetes

import (
	"context"

	"github.com/d10ffeed/corral/provider/internal/execkit"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox: a Pod.
type handle struct {
	*execkit.Kit // FS, Exec, Spawn, SetEnv through the API server's exec
	p            *Provider
	id           string // the sandbox id: the Pod's name, or the SandboxClaim's in Sandbox mode
	pod          string // the Pod commands run in
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(id, pod string) *handle {
	h := &handle{p: p, id: id, pod: pod}
	h.Kit = execkit.New(backend{h}, execproc.Options{Provider: Name, ID: id, Root: p.opts.Workdir,
		KillGrace: p.opts.KillGrace, Logger: p.log}, nil)
	return h
}

// ID returns the sandbox id: the Pod's name (in Sandbox mode the
// SandboxClaim's).
func (h *handle) ID() string { return h.id }

// Provider returns "kubernetes".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace directory inside the container.
func (h *handle) WorkspaceRoot() string { return h.p.opts.Workdir }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// Snapshot is Unimplemented: a plain cluster has no Pod snapshots.
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, sandbox.Unsupported(Name, "snapshots")
}

// Fork is Unimplemented: a plain cluster has no Pod snapshots to fork
// from.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy deletes the sandbox's Pod. Destroying twice succeeds.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.id) }

// PodName returns the Pod behind a handle made by this provider and false
// for any other handle. It sees through the guard and decorators
// (sandbox.As).
func PodName(h sandbox.Handle) (string, bool) {
	var kh *handle
	if h == nil || !sandbox.As(h, &kh) {
		return "", false
	}
	return kh.pod, true
}
