package blaxel_test

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
	"github.com/d10ffeed/corral/provider/blaxel/blaxelfake"
)

// sdkPath returns where @blaxel/core is installed.
func sdkPath() string {
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	return filepath.Join(dir, "node_modules", "@blaxel", "core")
}

// sdkDir returns the installed @blaxel/core, or skips (fails under
// CI=true).
func sdkDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: the official SDK check needs it (apt-get install nodejs), then run scripts/setup-agents.sh")
	}
	sdk := sdkPath()
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		testutil.Unavailable(t, "@blaxel/core is not installed in "+filepath.Dir(filepath.Dir(sdk))+": run scripts/setup-agents.sh")
	}
	return sdk
}

// runSDK runs testdata/sdkcheck.mjs against the fake and returns its JSON.
func runSDK(t *testing.T, s *blaxelfake.Server) map[string]json.RawMessage {
	t.Helper()
	sdk := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, _ := filepath.Abs("testdata/sdkcheck.mjs")
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = t.TempDir()
	env := []string{"HOME=" + cmd.Dir} // no ~/.blaxel/config.yaml of the machine's
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BL_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "SDK_DIR="+sdk, "BL_API_URL="+s.APIURL(), "BL_API_KEY="+testKey,
		"BL_WORKSPACE="+blaxelfake.Workspace, "BL_DISABLE_H2=true", "DO_NOT_TRACK=1")
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

// TestOfficialSDK: @blaxel/core, pointed at the fake through BL_API_URL,
// creates a sandbox (createIfNotExists: the second call gets the first
// sandbox; a plain create of a taken name is 409), gets it, runs a
// command (output apart, exit code), streams a command's output (the
// NDJSON path) and a background process's logs, writes, reads (text and
// binary), lists and removes files (a missing one is 404), kills a
// background process (the group SIGKILL: its grandchild dies too, and the
// kill marker is in its stdout), makes a private preview and its token,
// and deletes the sandbox (a get is then 404).
func TestOfficialSDK(t *testing.T) {
	s := newFake(t)
	out := runSDK(t, s)
	want := map[string]string{
		"create":            `{"name":"sdk-check","status":"DEPLOYED","ttl":"1h","label":"sdk"}`,
		"createIfNotExists": `"sdk"`,
		"conflict":          `"409:SANDBOX_ALREADY_EXISTS"`,
		"get":               `"DEPLOYED"`,
		"exec":              `{"exitCode":3,"stdout":"hello\n","stderr":"oops\n","status":"failed"}`,
		"stream":            `{"stdout":"line1\nline2\nline3\n","stderr":"err\n","exitCode":0}`,
		"streamLogs":        `["started","later"]`,
		"file":              `"file content\n"`,
		"binary":            `[0,255,1,128]`,
		"list":              `{"files":["a.txt","bin.dat"],"dirs":["sub"]}`,
		"missing":           `"404:"`,
		"kill":              `{"status":"killed","marker":true,"grandchild":"gone"}`,
		"preview":           `{"port":3000,"public":false,"token":true}`,
		"destroy":           `"404:SANDBOX_NOT_FOUND"`,
	}
	for k, v := range want {
		if got := string(out[k]); got != v {
			t.Errorf("%s: got %s, want %s", k, got, v)
		}
	}
	t.Logf("SDK steps against the fake: %s", out["steps"])
	t.Logf("SDK requests per operation: %s; fake counts: create %d, get %d, delete %d, process %d, processGet %d, processStream %d, processKill %d, fsGet %d, fsPut %d, fsDelete %d, createPreview %d, createToken %d",
		out["requests"], s.Count("create"), s.Count("get"), s.Count("delete"), s.Count("process"), s.Count("processGet"),
		s.Count("processStream"), s.Count("processKill"), s.Count("fsGet"), s.Count("fsPut"), s.Count("fsDelete"), s.Count("createPreview"), s.Count("createToken"))
}
