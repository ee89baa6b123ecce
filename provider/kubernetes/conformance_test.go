package kubernetes_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
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

// floodBytes is the journal suite's flood size here. Every byte a poll
// read takes crosses the API server and the kubelet's exec stream: about
// 2 MB/s under -race on a quiet one-node cluster, a sixth of that under
// the full CI's load (64 MiB had reached 52 MiB when a case's 3-minute
// bound ran out), so the cluster gets the 16 MiB the suite allows for
// wires, still sixteen times the journal's MaxLine.
const floodBytes = 16 << 20

// TestJournalConformance runs the run journal's suite in Pods.
func TestJournalConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Harness{Provider: newProvider(t, kubernetes.Options{}), FloodBytes: floodBytes})
}

// TestRunConformance runs the takeover and reaper suites in Pods, over
// the memory and SQLite stores.
func TestRunConformance(t *testing.T) {
	runtest.RunEach(t, newProvider(t, kubernetes.Options{}), runtest.EmbeddedStores())
}

// sandboxModeProvider is a Sandbox-mode provider (agent-sandbox's
// SandboxClaims) in a namespace of the test's own.
func sandboxModeProvider(t testing.TB, opts kubernetes.Options) *kubernetes.Provider {
	t.Helper()
	k8stest.RequireAgentSandbox(t)
	opts.Mode = kubernetes.ModeSandbox
	opts.Namespace = k8stest.Namespace(t)
	return newProvider(t, opts)
}

// TestSandboxModeConformance runs the provider suite with sandboxes as
// SandboxClaims (cold: no warm pool).
func TestSandboxModeConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandboxModeProvider(t, kubernetes.Options{})})
}

// TestSandboxModeWarmPoolConformance runs it with claims served from a
// warm pool of two.
func TestSandboxModeWarmPoolConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandboxModeProvider(t, kubernetes.Options{WarmPool: 2})})
}

// TestSandboxModeJournalConformance runs the journal suite in Sandbox
// mode.
func TestSandboxModeJournalConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Harness{Provider: sandboxModeProvider(t, kubernetes.Options{}), FloodBytes: floodBytes})
}

// TestSandboxModeRunConformance runs the takeover and reaper suites in
// Sandbox mode.
func TestSandboxModeRunConformance(t *testing.T) {
	runtest.RunEach(t, sandboxModeProvider(t, kubernetes.Options{}), runtest.EmbeddedStores())
}
