package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	flags := []string{"--provider", "e2b", "--api-url", f.URL(), "--sandbox-url", f.URL(), "--domain", f.Domain()}
	t.Setenv("E2B_API_KEY", "")
	_, errOut, code := corral(t, append([]string{"exec"}, append(flags, "--", "true")...)...)
	if code == 0 || !strings.Contains(errOut, "E2B needs E2B_API_KEY") {
		t.Fatalf("without a key: exit %d: %s", code, errOut)
	}
	t.Setenv("E2B_API_KEY", key)
	out, errOut, code := corral(t, append([]string{"exec", "--keep"}, append(flags, "--", "sh", "-c", "echo from-e2b; exit 3")...)...)
	_, after, ok := strings.Cut(errOut, "sandbox kept: ")
	id, _, _ := strings.Cut(strings.TrimSpace(after), " ")
	if code != 3 || out != "from-e2b\n" || !ok {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = corral(t, append([]string{"sandbox", "ls", "--json"}, flags...)...)
	var rows []struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("ls: exit %d, %s %s (want [%s])", code, out, errOut, id)
	}
	out, errOut, code = corral(t, append([]string{"sandbox", "prune"}, flags...)...)
	t.Logf("exec kept %s (key %q); prune: exit %d: %s%s; sandboxes left on the fake %d", id, rows[0].Key, code, out, errOut, len(f.Sandboxes("", nil)))
	if code != 0 || !strings.Contains(out+errOut, id) || len(f.Sandboxes("", nil)) != 0 {
		t.Fatalf("prune: exit %d: %s %s", code, out, errOut)
	}
}
