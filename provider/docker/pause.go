package docker

import (
	"context"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// pauseGrace is how long a paused container's processes get between
// SIGTERM and SIGKILL (the container's main process exits at once on
// SIGTERM; what the agent left running may take longer).
const pauseGrace = 10

var (
	_ sandbox.Pauser        = (*handle)(nil)
	_ sandbox.PauseReporter = (*Provider)(nil)
)

// Pause stops the container (docker stop) and keeps it: its file system
// stays, every process in it ends, and Resume starts it again (a
// container paused by docker pause is unpaused). Pausing a stopped
// container is a no-op.
func (h *handle) Pause(ctx context.Context) error {
	grace := pauseGrace
	if _, err := h.p.cli.ContainerStop(ctx, h.cid, client.ContainerStopOptions{Timeout: &grace}); err != nil {
		return h.p.apiError("docker.pause", h.id, err)
	}
	h.p.log.Debug("docker: sandbox paused", "id", h.id, "container", h.cid)
	return nil
}

// Paused reports whether the sandbox's container is not running (stopped,
// by Pause or otherwise) or frozen by docker pause: in either case Resume
// would start it. It does not start the container.
func (p *Provider) Paused(ctx context.Context, id string) (bool, error) {
	info, err := p.lookup(ctx, "docker.paused", id)
	if err != nil {
		return false, err
	}
	return info.State != nil && (info.State.Paused || !info.State.Running), nil
}
