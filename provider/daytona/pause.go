package daytona

import (
	"context"
	"net/http"
	"net/url"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

var (
	_ sandbox.Pauser        = (*handle)(nil)
	_ sandbox.PauseReporter = (*Provider)(nil)
)

// stoppedState reports the states from which Resume starts the sandbox again.
func stoppedState(state string) bool {
	switch state {
	case "stopped", "stopping", "archived", "archiving", "paused":
		return true
	}
	return false
}

// Pause implements sandbox.Pauser for the idle reaper: Daytona's stop
// (POST /sandbox/{id}/stop), which keeps the sandbox's disk and ends its
// processes; Resume starts it again. A sandbox already stopped (or
// archived) is left as it is.
func (h *handle) Pause(ctx context.Context) error {
	const op = Name + ".pause"
	sb, err := h.p.get(ctx, op, h.sb.ID)
	if err != nil {
		return err
	}
	if gone(sb.State) {
		return sandbox.Errorf(sandbox.NotFound, op, sb.ID, "daytona sandbox %s is %s", sb.ID, sb.State)
	}
	if stoppedState(sb.State) {
		return nil
	}
	_, err = h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: sb.ID, Method: http.MethodPost,
		Path: "/sandbox/" + url.PathEscape(sb.ID) + "/stop", Idempotent: true}, nil)
	return err
}

// Paused implements sandbox.PauseReporter: the sandbox's state (GET
// /sandbox/{id}), without starting it. A gone sandbox is NotFound.
func (p *Provider) Paused(ctx context.Context, id string) (bool, error) {
	const op = Name + ".paused"
	if id == "" {
		return false, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox id")
	}
	sb, err := p.get(ctx, op, id)
	if err != nil {
		return false, err
	}
	if gone(sb.State) {
		return false, sandbox.Errorf(sandbox.NotFound, op, id, "daytona sandbox %s is %s", id, sb.State)
	}
	return stoppedState(sb.State), nil
}
