package kubernetes_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestConformance runs the provider suite on Pods of the real cluster.
func TestConformance(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p})
}

// TestConformanceGuarded runs it through the guard, as the registry hands
// the provider out.
func TestConformanceGuarded(t *testing.T) {
	p := newProvider(t, kubernetes.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the run journal's suite in Pods.
func TestJournalConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Harness{Provider: newProvider(t, kubernetes.Options{})})
}

// TestRunConformance runs the takeover and reaper suites in Pods, over
// the memory and SQLite stores.
func TestRunConformance(t *testing.T) {
	runtest.RunEach(t, newProvider(t, kubernetes.Options{}), runtest.EmbeddedStores())
}
