package e2b

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

// Pause implements sandbox.Pauser for the idle reaper: E2B's pause without
// memory (POST /sandboxes/{id}/pause, {"memory": false}), which keeps the
// file system and ends every process; Resume's connect wakes it. Pausing a
// paused sandbox is a no-op.
func (h *handle) Pause(ctx context.Context) error { return Pause(ctx, h, false) }

// Paused implements sandbox.PauseReporter: GET /sandboxes/{id} and its
// state, without waking the sandbox. A sandbox that is gone is NotFound.
func (p *Provider) Paused(ctx context.Context, id string) (bool, error) {
	if id == "" {
		return false, sandbox.Errorf(sandbox.InvalidArgument, Name+".paused", id, "empty sandbox id")
	}
	var d SandboxDetail
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".paused", ID: id, Method: http.MethodGet,
		Path: "/sandboxes/" + url.PathEscape(id)}, &d); err != nil {
		return false, err
	}
	return d.State == "paused", nil
}
