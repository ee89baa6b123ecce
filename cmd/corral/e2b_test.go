package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/provider/e2b/e2bfake"
)

// TestE2BCrashTakeover is TestCrashTakeover on provider e2b pointed at the
// E2B fake: corral run --config corral.yaml -- sh -c '…' is SIGKILLed
// mid-run and corral attach delivers every line exactly once with the
// agent's exit code. CORRAL_CRASH_TRIALS sets the trials (default 3).
func TestE2BCrashTakeover(t *testing.T) {
	trials := crashTrialsFromEnv(3)
	const key = "e2b_cli_test_key_0c1d2e3f"
	f, err := e2bfake.New(e2bfake.Options{BaseDir: t.TempDir(), APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	t.Setenv("E2B_API_KEY", key)
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: e2b\n  e2b: {template: base, timeout: 10m, apiUrl: %q, sandboxUrl: %q, domain: %q}\n",
		f.URL(), f.URL(), f.Domain()), trials)
	t.Logf("%d trials; fake requests: create %d, start %d, connect %d, delete %d; sandboxes left %d",
		trials, f.Count("create"), f.Count("start"), f.Count("connect"), f.Count("delete"), len(f.Sandboxes("", nil)))
}

// TestE2BSandboxCommands: corral exec --provider e2b with the flags
// pointed at the fake runs a command and keeps the sandbox; corral
// sandbox ls lists it (by metadata corral=1, not another client's), and
// prune removes it; a missing key names E2B_API_KEY.
func TestE2BSandboxCommands(t *testing.T) {
	const key = "e2b_cli_test_key_9a8b7c6d"
	f, err := e2bfake.New(e2bfake.Options{BaseDir: t.TempDir(), APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	id, listed, pruned := keptSandbox{name: "e2b", keyEnv: "E2B_API_KEY", key: key, missingKey: "E2B needs E2B_API_KEY",
		flags: []string{"--provider", "e2b", "--api-url", f.URL(), "--sandbox-url", f.URL(), "--domain", f.Domain()}}.run(t)
	t.Logf("exec kept %s (key %q); prune: %s; sandboxes left on the fake %d", id, listed, pruned, len(f.Sandboxes("", nil)))
	if left := f.Sandboxes("", nil); len(left) != 0 {
		t.Fatalf("prune left %d sandboxes on the fake", len(left))
	}
}
