package vercel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/vercel/vercelfake"
)

// sdkDir returns the installed @vercel/sandbox, or skips (fails under
// CI=true).
func sdkDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: the official SDK check needs it (apt-get install nodejs), then run scripts/setup-agents.sh")
	}
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	sdk := filepath.Join(dir, "node_modules", "@vercel", "sandbox")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		testutil.Unavailable(t, "@vercel/sandbox is not installed in "+dir+"/node_modules: run scripts/setup-agents.sh")
	}
	return sdk
}

// runSDK runs testdata/sdkcheck.mjs against the fake and returns its JSON.
func runSDK(t *testing.T, s *vercelfake.Server) map[string]json.RawMessage {
	t.Helper()
	sdk := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script, _ := filepath.Abs("testdata/sdkcheck.mjs")
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = t.TempDir()
	// No VERCEL_OIDC_TOKEN reaches the script: the token is explicit.
	env := []string{}
	for _, kv := range os.Environ() {
		if !bytes.HasPrefix([]byte(kv), []byte("VERCEL_")) {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "SDK_DIR="+sdk, "VERCEL_FAKE_URL="+s.APIURL(), "VERCEL_TOKEN="+testToken,
		"VERCEL_TEAM_ID="+vercelfake.Team, "VERCEL_PROJECT_ID="+vercelfake.Project)
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

// TestOfficialSDK: @vercel/sandbox, pointed at the fake through its fetch
// option, creates a named persistent sandbox, gets it by name, runs a
// command (output apart, exit code), streams a detached command's logs,
// writes, reads (a missing file is null: the 404) and lists files, makes
// a directory (an existing one is 400 "File exists"), kills a background
// command (the API's kill reaches its pid: the backgrounded grandchild
// runs on), snapshots (the session stops and the next command resumes
// it), restores the snapshot into a new sandbox, stops and deletes.
func TestOfficialSDK(t *testing.T) {
	s := newFake(t)
	out := runSDK(t, s)
	want := map[string]string{
		"create":        `{"name":"sdk-check","status":"running","runtime":"node22","persistent":true}`,
		"getByName":     `true`,
		"domain":        `"https://sdk-check-3000.vercel.run"`,
		"exec":          `{"exitCode":3,"stdout":"hello\n","stderr":"oops\n"}`,
		"stream":        `{"stdout":"line1\nline2\nline3\n","stderr":"err\n","exitCode":0}`,
		"file":          `"file content\n"`,
		"missing":       `null`,
		"list":          `["a.txt"]`,
		"mkdirExists":   `"400:mkdir sdk: File exists"`,
		"kill":          `{"exitCode":137,"grandchild":"running"}`,
		"snapshot":      `{"status":"created","sandboxStatus":"stopped"}`,
		"resumed":       `true`,
		"restore":       `"file content\n"`,
		"destroy":       `"APIError:404"`,
		"networkPolicy": `{"allow":["api.anthropic.com","*.npmjs.org"],"subnets":{"allow":["203.0.113.7/32"]}}`,
		"badPolicy":     `"APIError:400"`,
	}
	for k, v := range want {
		if got := string(out[k]); got != v {
			t.Errorf("%s: got %s, want %s", k, got, v)
		}
	}
	t.Logf("SDK steps against the fake: %s", out["steps"])
	t.Logf("SDK requests per operation: %s; fake counts: create %d, get %d, run %d, logs %d, command %d, kill %d, read %d, write %d, mkdir %d, snapshot %d, delete %d",
		out["requests"], s.Count("create"), s.Count("get"), s.Count("run"), s.Count("logs"), s.Count("command"), s.Count("kill"),
		s.Count("read"), s.Count("write"), s.Count("mkdir"), s.Count("snapshot"), s.Count("delete"))
}

// sdkDirOK reports whether the SDK is installed (without skipping).
func sdkDirOK() (string, error) {
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	sdk := filepath.Join(dir, "node_modules", "@vercel", "sandbox")
	if _, err := exec.LookPath("node"); err != nil {
		return "", err
	}
	_, err := os.Stat(filepath.Join(sdk, "package.json"))
	return sdk, err
}

func fmtSscan(s string, n *int) (int, error) { return fmt.Sscan(s, n) }
