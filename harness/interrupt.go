package harness

import "context"

// Interrupter is implemented by harnesses whose agent can be asked to end
// its turn before the runner kills it (the acp harness sends ACP
// session/cancel).
type Interrupter interface {
	// Interrupt asks the run's agent to stop and waits, within the
	// harness's own bound or ctx, until it did. It reports false when this
	// process cannot reach the run's agent.
	Interrupt(ctx context.Context, runID string) bool
}

// Interrupt asks h to stop the run's agent when h is an Interrupter and
// reports whether it stopped; the runner kills the run's processes after
// it either way.
func Interrupt(ctx context.Context, h Harness, runID string) bool {
	in, ok := h.(Interrupter)
	return ok && in.Interrupt(ctx, runID)
}
