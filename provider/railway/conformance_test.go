package railway_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite against the fake, over the
// guard as the registry hands providers out (killableProcesses measured
// by KillMeasured).
func TestConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), railway.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the journal suite against the fake. The
// flood is 16 MiB (four times execproc's 4 MiB of unread output per
// stream) rather than 64: each strategy's flood crosses the exec socket,
// and 64 MiB three times took 49 s of this package's time under -race.
func TestJournalConformance(t *testing.T) {
	t.Parallel() // wait-bound (the suite's graces and deadlines): beside the run suite
	p, _ := newProvider(t, newFake(t), railway.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the memory
// and SQLite stores.
func TestRunConformance(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, newFake(t), railway.Options{})
	runtest.RunEach(t, p, runtest.EmbeddedStores())
}
