package qemu_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite on microVMs (TCG on our CI).
func TestConformance(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p, Port: 8080})
}

// TestConformanceGuarded runs it through the guard, as the registry hands
// the provider out.
func TestConformanceGuarded(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{}), Port: 8080})
}

// TestJournalConformance runs the run journal's suite in microVMs.
func TestJournalConformance(t *testing.T) {
	// The flood crosses an emulated guest CPU and a serial port: 16 MiB,
	// still far past every buffer on the way.
	journaltest.Run(t, journaltest.Harness{Provider: newProvider(t, qemu.Options{}), FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites in microVMs, over
// the memory and SQLite stores.
func TestRunConformance(t *testing.T) {
	runtest.RunEach(t, newProvider(t, qemu.Options{}), runtest.EmbeddedStores())
}
