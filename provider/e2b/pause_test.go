package e2b_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/provider/internal/pausetest"
)

// TestIdlePauseThenEnsure: E2B is a sandbox.Pauser (pause without memory)
// and a PauseReporter (the sandbox's state, read without waking it).
func TestIdlePauseThenEnsure(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{Timeout: 10 * time.Minute})
	pausetest.IdlePauseThenEnsure(ctx, t, p, pausetest.Checks{
		Paused: func(t *testing.T, id string) {
			if !f.Paused(id) {
				t.Fatal("the fake's sandbox is not paused after the reap")
			}
			var memory *bool
			for _, b := range f.Bodies() {
				if b.Route == "pause" {
					var body e2b.PauseRequest
					if err := json.Unmarshal(b.Body, &body); err != nil {
						t.Fatal(err)
					}
					memory = body.Memory
				}
			}
			if memory == nil || *memory {
				t.Fatalf("the pause asked for memory %v, want false (the file system only)", memory)
			}
		},
		Resumed: func(t *testing.T, id string) {
			if f.Paused(id) {
				t.Fatal("the fake's sandbox is still paused after ensure")
			}
		},
	})
	t.Logf("paused by the reaper (memory false), reported paused, woken by ensure with its file")
}
