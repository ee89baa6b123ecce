package sbx_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/sbx"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite against the fake, over the
// guard as the registry hands providers out (killableProcesses measured
// by KillMeasured).
func TestConformance(t *testing.T) {
	p := newProvider(t, newFake(t), sbx.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the journal suite against the fake.
func TestJournalConformance(t *testing.T) {
	p := newProvider(t, newFake(t), sbx.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the memory
// and SQLite stores.
func TestRunConformance(t *testing.T) {
	p := newProvider(t, newFake(t), sbx.Options{})
	runtest.RunEach(t, p, runtest.EmbeddedStores())
}
