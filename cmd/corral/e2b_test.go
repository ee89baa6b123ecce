package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/d10ffeed/corral/provider/e2b/e2bfake"
)

// TestE2BCrashTakeover is TestCrashTakeover on provider e2b pointed at the
// E2B fake: corral run --config corral.yaml -- sh -c '…' is SIGKILLed
// mid-run and corral attach delivers every line exactly once with the
// agent's exit code. CORRAL_CRASH_TRIALS sets the trials (default 3).
func TestE2BCrashTakeover(t *testing.T) {
	trials := 3
	if v, err := strconv.Atoi(os.Getenv("CORRAL_CRASH_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	const key = "e2b_cli_test_key_0c1d2e3f"
	f, err := e2bfake.New(e2bfake.Options{BaseDir: t.TempDir(), APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	t.Setenv("E2B_API_KEY", key)
	dir := t.TempDir()
	yaml := fmt.Sprintf("id: crash\nprovider:\n  name: e2b\n  e2b: {template: base, timeout: 10m, apiUrl: %q, sandboxUrl: %q, domain: %q}\n",
		f.URL(), f.URL(), f.Domain())
	cfg := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range trials {
		t.Run(fmt.Sprint("trial", i), func(t *testing.T) { crashTrial(t, cfg, i) })
	}
	t.Logf("%d trials; fake requests: create %d, start %d, connect %d, delete %d; sandboxes left %d",
		trials, f.Count("create"), f.Count("start"), f.Count("connect"), f.Count("delete"), len(f.Sandboxes("", nil)))
}
