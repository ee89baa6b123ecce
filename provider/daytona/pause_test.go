package daytona_test

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/provider/internal/pausetest"
)

// TestIdlePauseThenEnsure: Daytona is a sandbox.Pauser (stop) and a
// PauseReporter (the sandbox's state, read without starting it); a second
// pause of a stopped sandbox sends no second stop.
func TestIdlePauseThenEnsure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	t.Cleanup(cancel)
	f := newFake(t)
	p, _ := newProvider(t, f, daytona.Options{})
	stops := 0
	pausetest.IdlePauseThenEnsure(ctx, t, p, pausetest.Checks{
		Paused: func(t *testing.T, id string) {
			if st := f.SandboxState(id); st != "stopped" {
				t.Fatalf("the fake's state after the reap: %q, want stopped", st)
			}
			stops = f.Count("stop")
		},
		Repaused: func(t *testing.T, id string) {
			if n := f.Count("stop"); n != stops {
				t.Fatalf("pausing a stopped sandbox sent %d more stops", n-stops)
			}
		},
		Resumed: func(t *testing.T, id string) {
			if st := f.SandboxState(id); st != "started" {
				t.Fatalf("the fake's state after ensure: %q, want started", st)
			}
		},
	})
	t.Logf("stopped by the reaper (%d stop), reported paused, started by ensure with its file", stops)
}
