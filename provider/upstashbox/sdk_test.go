package upstashbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
)

// sdkModules returns the node_modules holding @upstash/box, or skips
// (fails under CI=true).
func sdkModules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: the official SDK check needs it (apt-get install nodejs), then run scripts/setup-agents.sh")
	}
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	nm := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(nm, "@upstash", "box", "package.json")); err != nil {
		testutil.Unavailable(t, "@upstash/box is not installed in "+nm+": run scripts/setup-agents.sh")
	}
	return nm
}

// runSDK runs testdata/sdkcheck.mjs against the fake and returns its
// JSON. An ES module does not search NODE_PATH, so the script runs from
// a directory whose node_modules is the agents'.
func runSDK(t *testing.T, baseURL string) map[string]json.RawMessage {
	t.Helper()
	nm := sdkModules(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/sdkcheck.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sdkcheck.mjs"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(nm, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", "sdkcheck.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "UPSTASH_BOX_BASE_URL="+baseURL, "UPSTASH_BOX_API_KEY="+testKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sdkcheck.mjs: %v\nstderr: %s\nstdout: %s", err, stderr.String(), stdout.String())
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("sdkcheck.mjs output %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	return out
}

// TestOfficialSDK: @upstash/box 0.5.5, pointed at the fake, creates a
// box (polling it from "creating"), gets it by name, runs a command
// (output, stderr and exit code), streams one (exec-stream), writes,
// reads and lists files, kills a background command, snapshots, creates
// a box from the snapshot and deletes both, asks for a preview with a
// bearer token, pauses and resumes, deletes the box (then 404) and is
// refused with a bad key (401).
func TestOfficialSDK(t *testing.T) {
	f := newFake(t)
	out := runSDK(t, f.URL())
	want := map[string]string{
		"created":        `true`,
		"getByName":      `true`,
		"status":         `"idle"`,
		"command":        `{"exitCode":3,"stdout":"hello\n","stderr":"oops\n"}`,
		"stream":         `{"output":"line1\nline2\nline3\n","exitCode":0}`,
		"file":           `"file content\n"`,
		"list":           `["a.txt:false:13"]`,
		"kill":           `"gone"`,
		"snapshot":       `"ready"`,
		"restored":       `"file content\n"`,
		"snapshotsAfter": `0`,
		"preview":        `{"port":3000,"hasToken":true,"url":true}`,
		"paused":         `"paused"`,
		"resumed":        `"idle"`,
		"destroy":        `"BoxError:404"`,
		"badKey":         `"BoxError:401:Unauthorized: invalid or missing API key"`,
	}
	for k, v := range want {
		if got := string(out[k]); got != v {
			t.Errorf("%s: got %s, want %s", k, got, v)
		}
	}
	if f.Boxes() != 0 {
		t.Errorf("%d boxes left after the SDK deleted its own", f.Boxes())
	}
	t.Logf("SDK check: %d requests to the fake, %d boxes left, %d snapshots left", f.Total(), f.Boxes(), f.Snapshots())
}
