package sprites_test

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

// sdkEntry returns the @fly/sprites entry point, or skips (fails under
// CI=true).
func sdkEntry(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: the official SDK check needs it (apt-get install nodejs), then run scripts/setup-agents.sh")
	}
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	entry := filepath.Join(dir, "node_modules", "@fly", "sprites", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		testutil.Unavailable(t, "@fly/sprites is not installed in "+dir+": run scripts/setup-agents.sh")
	}
	return entry
}

// runSDK runs testdata/sdkcheck.mjs against the fake and returns its
// JSON. Node before 22 has WebSocket (which the SDK's exec uses) behind
// --experimental-websocket; the flag is passed when this node has no
// WebSocket of its own.
func runSDK(t *testing.T, apiURL string) map[string]json.RawMessage {
	t.Helper()
	entry := sdkEntry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	abs, _ := filepath.Abs("testdata/sdkcheck.mjs")
	args := []string{abs}
	if out, err := exec.Command("node", "-e", "process.stdout.write(typeof WebSocket)").Output(); err == nil && string(out) != "function" {
		args = append([]string{"--experimental-websocket", "--no-warnings"}, args...)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "SPRITES_SDK="+entry, "SPRITES_API_URL="+apiURL, "SPRITES_API_KEY="+testKey)
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

// TestOfficialSDK: @fly/sprites, pointed at the fake, creates a Sprite,
// gets and lists it, runs a command (output, stderr, exit code), shows
// env= replacing the environment, streams a spawned command, pipes stdin,
// writes, reads, lists, renames, stats and removes a file, kills a
// background command's group through the session kill endpoint, takes a
// checkpoint and restores it in place (reads failing first), and deletes
// the Sprite.
func TestOfficialSDK(t *testing.T) {
	s := newFake(t)
	out := runSDK(t, s.APIURL())
	want := map[string]string{
		"create":  `{"name":"sdk-check","status":"running","labels":["corral","via-sdk"],"auth":"public","hasURL":true}`,
		"get":     `{"id":true,"listed":["sdk-check"]}`,
		"exec":    `{"exitCode":3,"stdout":"hello\n","stderr":"oops\n"}`,
		"env":     `"bar:"`,
		"stream":  `{"stdout":"line1\nline2\nline3\n","stderr":"err\n","exitCode":0}`,
		"stdin":   `{"stdout":"piped\n","exitCode":0}`,
		"file":    `"file content\n"`,
		"list":    `["a.txt:false"]`,
		"stat":    `13`,
		"gone":    `false`,
		"destroy": `"APIError:404"`,
	}
	for k, v := range want {
		if got := string(out[k]); got != v {
			t.Errorf("%s: got %s, want %s", k, got, v)
		}
	}
	// The kill's events: the signal, perhaps the timeout's SIGKILL (when
	// the group outlived the 1s), the exit, the end.
	var kill struct {
		Events   []string `json:"events"`
		Group    string   `json:"group"`
		ExitCode int      `json:"exitCode"`
	}
	_ = json.Unmarshal(out["kill"], &kill)
	ev := strings.Join(kill.Events, ",")
	if (ev != "signal,exited,complete" && ev != "signal,timeout,exited,complete") || kill.Group != "gone" || kill.ExitCode != 143 {
		t.Errorf("kill: %s", out["kill"])
	}
	var cp struct {
		ID           string `json:"id"`
		Restored     string `json:"restored"`
		ReadFailures int    `json:"readFailures"`
	}
	_ = json.Unmarshal(out["checkpoint"], &cp)
	if cp.ID != "v1" || cp.Restored != "checkpointed" || cp.ReadFailures != 2 {
		t.Errorf("checkpoint: %s", out["checkpoint"])
	}
	t.Logf("SDK steps against the fake: %s", out["steps"])
	t.Logf("checkpoint %s; requests: create %d, get %d, list %d, exec %d, kill %d, fs read %d write %d list %d, checkpoint %d, restore %d, delete %d",
		out["checkpoint"], s.Count("create"), s.Count("get"), s.Count("list"), s.Count("exec"), s.Count("kill"),
		s.Count("fsRead"), s.Count("fsWrite"), s.Count("fsList"), s.Count("checkpoint"), s.Count("restore"), s.Count("delete"))
}
