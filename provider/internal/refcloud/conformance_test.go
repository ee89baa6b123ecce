package refcloud_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/internal/refcloud"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite against the reference provider
// across the loopback network, with the group kill (killableProcesses
// claimed and measured).
func TestConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t, fakecloud.GroupKill), refcloud.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p})
}

// TestConformanceGuarded runs the provider suite over sandbox.Guard, as
// the registry hands providers out.
func TestConformanceGuarded(t *testing.T) {
	p, _ := newProvider(t, newFake(t, fakecloud.GroupKill), refcloud.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the journal suite over the network.
func TestJournalConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t, fakecloud.GroupKill), refcloud.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the
// memory and SQLite stores (the durable run fields included).
func TestRunConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t, fakecloud.GroupKill), refcloud.Options{})
	runtest.RunEach(t, p, runtest.EmbeddedStores())
}
