package harness

import (
	"context"

	"github.com/d10ffeed/corral/sandbox"
)

// Reattacher is implemented by harnesses whose agent is driven by a client
// in the corral process (the acp harness's ACP client), so that a run
// whose driving process died can go on in the process that takes it over
// (run.Runner's takeover) instead of ending when its agent loses its
// client.
type Reattacher interface {
	// Reattach lets this process's client take over the run's agent, if
	// it is still running and its client went away. It must not block for
	// long: what takes time runs in the background, and whatever happens
	// is journaled, so the taking-over driver reads it as any line. req
	// carries what the runner knows without the run's start request: the
	// run, its policy, scripts, secrets, answer key, RunDir, Journal and
	// WorkspaceRoot (not Prompt, Args, Env or Options: the harness keeps
	// what it needs in the journal). Errors are only logged by the runner.
	Reattach(ctx context.Context, h sandbox.Handle, req Request) error
}
