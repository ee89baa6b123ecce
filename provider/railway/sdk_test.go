package railway_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/railway/railwayfake"
)

// sdkDir returns the installed `railway` SDK, or skips (fails under
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
	sdk := filepath.Join(dir, "node_modules", "railway")
	if _, err := os.Stat(filepath.Join(sdk, "package.json")); err != nil {
		testutil.Unavailable(t, "the railway SDK is not installed in "+dir+"/node_modules: run scripts/setup-agents.sh")
	}
	return sdk
}

// runSDK runs testdata/sdkcheck.mjs against f and returns its step lines.
// The SDK is pointed at the fake by its own variables:
// RAILWAY_GRAPHQL_ENDPOINT (backboard) and RAILWAY_TCP_PROXY_WS_ENDPOINT
// (the exec socket; the files socket is derived from it, /ws/files).
// Node 20 needs --experimental-websocket for the global WebSocket the SDK
// uses (node 22, the SDK's engines floor, has it by default).
func runSDK(t *testing.T, f *railwayfake.Fake) []string {
	return runScript(t, f, "testdata/sdkcheck.mjs")
}

// runScript runs a node script of testdata against f and returns its
// stdout lines.
func runScript(t *testing.T, f *railwayfake.Fake, name string) []string {
	t.Helper()
	sdk := sdkDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script, _ := filepath.Abs(name)
	args := []string{script}
	if v, err := exec.Command("node", "--version").Output(); err == nil && strings.HasPrefix(string(v), "v20.") {
		args = append([]string{"--experimental-websocket", "--no-warnings"}, args...)
	}
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Dir = t.TempDir()
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RAILWAY_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "SDK_DIR="+sdk, "RAILWAY_API_TOKEN="+testToken, "RAILWAY_ENVIRONMENT_ID="+f.EnvironmentID(),
		"RAILWAY_GRAPHQL_ENDPOINT="+f.GraphQLURL(), "RAILWAY_TCP_PROXY_WS_ENDPOINT="+f.ExecWSURL())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr: %s\nstdout: %s", name, err, stderr.String(), stdout.String())
	}
	return strings.Split(strings.TrimSpace(stdout.String()), "\n")
}

// TestOfficialSDK: the official railway SDK (3.11) against the fake:
// create (RUNNING at once), connect, exec with its exit code and both
// streams, env in the init frame, streamed output, files over /ws/files
// (text and a 200 kB binary in 64 KiB frames, a mode, list, stat, exists,
// mkdir, rename, remove), kill of a backgrounded command (TERM to the
// group: exit -1), checkpoint, create from the checkpoint, list and delete
// checkpoints, fork, destroy (connect after is SandboxNotFoundError).
func TestOfficialSDK(t *testing.T) {
	f := newFake(t)
	steps := runSDK(t, f)
	want := []string{"create", "connect", "exec", "exec env", "stream", "write/read", "list/stat/mkdir/rename/remove",
		"kill background", "checkpoint", "checkpoints list/delete", "fork", "destroy"}
	if len(steps) != len(want) {
		t.Fatalf("steps: got %q, want %d steps", steps, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(steps[i], "ok "+w) {
			t.Errorf("step %d: got %q, want ok %s…", i, steps[i], w)
		}
	}
	t.Logf("SDK steps: %s", strings.Join(steps, "; "))
	t.Logf("fake requests: graphql %d, exec sockets %d, files sockets %d; sandboxes left %d",
		f.Count("graphql"), f.Count("exec"), f.Count("files"), f.Live())
	if f.Live() != 0 {
		t.Errorf("%d sandboxes left after the SDK destroyed its three", f.Live())
	}
}
