package upstashbox_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite against the Upstash Box fake, whose
// session kills on disconnect: killableProcesses rests on the provider's
// group kill, measured by KillMeasured. It and TestConformanceGuarded
// (each with a fake of its own) run in parallel with each other.
func TestConformance(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p})
}

// TestConformanceGuarded runs the provider suite over sandbox.Guard, as
// the registry hands providers out.
func TestConformanceGuarded(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the journal suite against the fake. The
// flood is 16 MiB (as cloudflare's): under -race the journal reader's
// per-line work, not the wire, is most of its cost.
func TestJournalConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the
// memory and SQLite stores (the durable run fields included).
func TestRunConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	runtest.RunEach(t, p, runtest.EmbeddedStores())
}
