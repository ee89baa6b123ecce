package daytona_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
)

// sdkModules returns the node_modules holding @daytonaio/sdk, or skips
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
	if _, err := os.Stat(filepath.Join(nm, "@daytonaio", "sdk", "package.json")); err != nil {
		testutil.Unavailable(t, "@daytonaio/sdk is not installed in "+nm+": run scripts/setup-agents.sh")
	}
	return nm
}

// runSDK runs testdata/sdkcheck.js against the fake and returns its JSON.
func runSDK(t *testing.T, apiURL string) map[string]json.RawMessage {
	t.Helper()
	nm := sdkModules(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "testdata/sdkcheck.js")
	cmd.Dir = t.TempDir()
	abs, _ := filepath.Abs("testdata/sdkcheck.js")
	cmd.Args = []string{"node", abs}
	cmd.Env = append(os.Environ(), "NODE_PATH="+nm, "DAYTONA_API_URL="+apiURL, "DAYTONA_API_KEY="+testKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("sdkcheck.js: %v\nstderr: %s\nstdout: %s", err, stderr.String(), stdout.String())
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
		t.Fatalf("sdkcheck.js output %q: %v (stderr %s)", stdout.String(), err, stderr.String())
	}
	return out
}

// TestOfficialSDK: @daytonaio/sdk, pointed at the fake, creates a
// sandbox, finds it by name and by labels, reads the work and home dirs,
// runs a command (output and exit code), streams a session command's
// stdout and stderr apart, reads a session, kills a background command's
// group, makes a folder, writes, reads, lists, stats and deletes files,
// gets a preview and a signed preview URL, takes a snapshot and deletes it
// by name, stops and starts the sandbox, creates one with egress allow
// lists (read back as sent; an entry with a port is a 400) and destroys
// it.
func TestOfficialSDK(t *testing.T) {
	s := newFake(t)
	out := runSDK(t, s.APIURL())
	want := map[string]string{
		"getByName":      `true`,
		"execute":        `{"exitCode":3,"result":"hello\noops\n"}`,
		"stream":         `{"stdout":"line1\nline2\nline3\n","stderr":"err\n","exitCode":0}`,
		"sessionSync":    `{"exitCode":4,"stdout":"out","stderr":"err"}`,
		"kill":           `{"group":"gone","exitCode":137}`,
		"file":           `"file content\n"`,
		"list":           `true`,
		"getSession":     `2`,
		"listFiles":      `["a.txt:false:13"]`,
		"fileInfoDelete": `{"size":13,"left":0}`,
		"signedPreview":  `true`,
		"snapshot":       `"started"`,
		"deleteSnapshot": `true`,
		"stopStart":      `"started"`,
		"destroy":        `"DaytonaNotFoundError:404"`,
		"allowLists":     `{"networkAllowList":"203.0.113.7/32","domainAllowList":"api.anthropic.com,*.npmjs.org"}`,
		"badAllowList":   `"DaytonaValidationError:400"`,
	}
	for k, v := range want {
		if got := string(out[k]); got != v {
			t.Errorf("%s: got %s, want %s", k, got, v)
		}
	}
	if h := string(out["homeDir"]); len(h) < 3 || h[0] != '"' {
		t.Errorf("homeDir: %s", h)
	}
	if len(s.Snapshots()) != 0 {
		t.Errorf("snapshots left after the SDK deleted it by name: %v", s.Snapshots())
	}
	if !strings.Contains(string(out["create"]), `"state":"started"`) {
		t.Errorf("create: %s", out["create"])
	}
	t.Logf("SDK steps against the fake: %s", out["steps"])
	t.Logf("create %s; preview %s; requests: create %d, get %d, execute %d, session exec %d, logs %d, upload %d, download %d",
		out["create"], out["preview"], s.Count("create"), s.Count("get"), s.Count("execute"), s.Count("sessionExec"),
		s.Count("logs"), s.Count("upload"), s.Count("download"))
}
