package harness

import "context"

// Interrupter is implemented by harnesses whose agent can be asked to end
// its turn before the runner kills it (the acp harness sends ACP
// session/cancel).
type Interrupter interface {
	// Interrupt asks the run's agent to stop and waits, within the
	// harness's own grace or ctx, until it did. It reports true only when
	// the agent stopped by itself, so that the run's journal ends without
	// a kill; false when it did not stop within the grace or this process
	// cannot reach the run's agent.
	Interrupt(ctx context.Context, runID string) bool
}

// Interrupt asks h to stop the run's agent when h is an Interrupter and
// reports whether it stopped. On a cancel the runner kills the run's
// processes only when it did not (or when the journal shows no exit soon
// after).
func Interrupt(ctx context.Context, h Harness, runID string) bool {
	in, ok := h.(Interrupter)
	return ok && in.Interrupt(ctx, runID)
}
