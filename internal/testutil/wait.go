package testutil

import (
	"context"
	"testing"
	"time"
)

// WaitGuard bounds a WaitFor: a generous hang guard, never a verdict on
// timing.
const WaitGuard = 2 * time.Minute

// WaitFor calls cond every interval until it reports true. An error from
// cond fails the test; so does ctx ending, or WaitGuard passing, first
// (naming what was awaited). It is for what runs outside the test's clock
// (a VM, a cluster's controllers), where testing/synctest cannot reach.
func WaitFor(tb testing.TB, ctx context.Context, what string, interval time.Duration, cond func(context.Context) (bool, error)) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(ctx, WaitGuard)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		ok, err := cond(ctx)
		if err != nil {
			tb.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("waiting for %s: it did not happen before %v", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
