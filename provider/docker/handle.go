package docker

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox: a container.
type handle struct {
	p       *Provider
	id      string // the sandbox id: the container name
	cid     string // the container id
	workdir string
	deny    bool   // created with NetworkDeny
	user    string // the user commands run as; "" for the container's
	fs      sandbox.FS
	procs   *execproc.Runner

	userLabels map[string]string // labels to carry over to forks
	forkImage  string            // for a fork: the image it was made from

	mu        sync.Mutex
	env       *execproc.Env  // create env, then SetEnv overlays
	hostPorts map[int]string // container port -> host port, once looked up
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(id, cid, workdir string, deny bool, user string) *handle {
	h := &handle{p: p, id: id, cid: cid, workdir: workdir, deny: deny, user: user,
		userLabels: map[string]string{}, env: execproc.NewEnv(nil)}
	h.fs = execfs.New(h.runFS, execfs.Options{Root: workdir, Provider: Name})
	h.procs = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: id, Root: workdir,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	return h
}

// ID returns the sandbox id: the container's name.
func (h *handle) ID() string { return h.id }

// Provider returns "docker".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace directory inside the container.
func (h *handle) WorkspaceRoot() string { return h.workdir }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the exec-backed file system.
func (h *handle) FS() sandbox.FS { return h.fs }

// runFS is the execfs Runner: a plain exec with no environment, run from
// "/" so that it works even when the workspace directory is gone.
func (h *handle) runFS(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run(ctx, "docker.fs", cmd.Argv(), cmd.Stdin, h.user)
}

// SetEnv merges vars into the environment of every later command. The
// values live only in this handle.
func (h *handle) SetEnv(ctx context.Context, vars map[string]string) error { return h.env.Set(vars) }

// ConnectPort returns http://127.0.0.1:<host port> for a port listed in
// Options.Ports.
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	if !h.p.caps.Ports {
		return sandbox.Endpoint{}, &sandbox.UnsupportedCapabilityError{Provider: Name, Capability: "ports",
			Hint: "list the container ports to publish in docker.Options.Ports"}
	}
	if !slices.Contains(h.p.opts.Ports, port) {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.FailedPrecondition, "docker.port", strconv.Itoa(port),
			"port %d is not published; list it in docker.Options.Ports (published: %v)", port, h.p.opts.Ports)
	}
	if h.deny {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.FailedPrecondition, "docker.port", strconv.Itoa(port),
			"sandbox %s was created with the network denied; no port is published", h.id)
	}
	h.mu.Lock()
	hp := h.hostPorts[port]
	h.mu.Unlock()
	if hp == "" {
		res, err := h.p.cli.ContainerInspect(ctx, h.cid, client.ContainerInspectOptions{})
		if err != nil {
			return sandbox.Endpoint{}, h.p.apiError("docker.port", h.id, err)
		}
		found := map[int]string{}
		if ns := res.Container.NetworkSettings; ns != nil {
			for cp, bindings := range ns.Ports {
				for _, b := range bindings {
					if b.HostPort != "" && (!b.HostIP.IsValid() || b.HostIP.IsLoopback()) {
						found[int(cp.Num())] = b.HostPort
						break
					}
				}
			}
		}
		h.mu.Lock()
		h.hostPorts = found
		h.mu.Unlock()
		hp = found[port]
	}
	if hp == "" {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.FailedPrecondition, "docker.port", strconv.Itoa(port),
			"port %d has no host binding on 127.0.0.1 (is the container running?)", port)
	}
	return sandbox.Endpoint{URL: "http://127.0.0.1:" + hp}, nil
}

// Snapshot commits the container to a local image in
// Options.SnapshotRepository and returns its reference as the snapshot id.
// The image carries the container's files and configuration, never the
// environment given to Create or SetEnv.
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	ref, created, err := h.commit(ctx, "docker.snapshot", "snapshot", label)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	return sandbox.Snapshot{ID: ref, Label: label, SandboxID: h.id, CreatedAt: created}, nil
}

// commit commits the container to a fresh reference labelled as corral's.
func (h *handle) commit(ctx context.Context, op, kind, label string) (string, time.Time, error) {
	ref := h.p.tagFor(h.id)
	now := time.Now().UTC()
	_, err := h.p.cli.ContainerCommit(ctx, h.cid, client.ContainerCommitOptions{
		Reference: ref,
		Comment:   "corral " + kind + " of " + h.id,
		// The commit keeps the container's configuration for every field
		// left empty here; the labels are merged over the container's.
		Config: &container.Config{Labels: map[string]string{
			LabelManaged:       "true",
			LabelSnapshot:      kind,
			LabelSnapshotOf:    h.id,
			LabelSnapshotLabel: label,
			LabelCreatedAt:     now.Format(time.RFC3339Nano),
			LabelKey:           "",
		}},
	})
	if err != nil {
		return "", time.Time{}, h.p.apiError(op, h.id, err)
	}
	h.p.log.Debug("docker: committed", "id", h.id, "image", ref, "kind", kind)
	return ref, now, nil
}

// Fork commits the container and starts a new sandbox from the image. The
// fork has its own id and files, the parent's environment (copied in
// memory) and network gate; its image is removed when the fork is
// destroyed.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	ref, _, err := h.commit(ctx, "docker.fork", "fork", "")
	if err != nil {
		return nil, err
	}
	opts := sandbox.CreateOptions{Labels: h.userLabels, Env: h.env.Copy()}
	if h.deny {
		opts.Network = sandbox.NetworkDeny
	}
	f, err := h.p.create(ctx, "docker.fork", ref, opts, map[string]string{LabelFrom: ref, LabelForkOf: h.id})
	if err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, rerr := h.p.cli.ImageRemove(rctx, ref, client.ImageRemoveOptions{}); rerr != nil && !cerrdefs.IsNotFound(rerr) {
			h.p.log.Warn("docker: removing the image of a failed fork failed", "image", ref, "err", rerr)
		}
		return nil, err
	}
	f.forkImage = ref
	return f, nil
}

// Destroy force-removes the container (and, for a fork, its image).
// Destroying twice succeeds.
func (h *handle) Destroy(ctx context.Context) error {
	return h.p.remove(ctx, "docker.destroy", h.id, h.cid, h.forkImage)
}

// ContainerID returns the Docker container id behind a handle made by this
// provider, and false for any other handle. It sees through the guard and
// decorators (sandbox.As), so it works on the handles the registry's
// guarded provider hands out.
func ContainerID(h sandbox.Handle) (string, bool) {
	var dh *handle
	if h == nil || !sandbox.As(h, &dh) {
		return "", false
	}
	return dh.cid, true
}
