package sprites_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/sprites"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite against the fake, over the
// guard as the registry hands providers out (killableProcesses measured
// by KillMeasured; the ports case reaches the Sprite's URL).
func TestConformance(t *testing.T) {
	s := newFake(t)
	p, _ := newProvider(t, s, sprites.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{}), Port: s.HTTPPort()})
}

// TestJournalConformance runs the journal suite against the fake.
func TestJournalConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), sprites.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the memory
// and SQLite stores.
func TestRunConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), sprites.Options{})
	runtest.RunEach(t, p, runtest.EmbeddedStores())
}
