package docker_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// The registry's test account. The hash is bcrypt (cost 4) of pullPass,
// made once with Python's crypt module; the registry accepts only bcrypt.
const (
	pullUser = "corral"
	pullPass = "corral-pull-test"
	pullHash = "$2b$04$iosdswx5bvxHDed9vKOIQeucML2k0M93PRerX4BZGuyW.l56p8kV6"
)

// startRegistry runs Debian's docker-registry on a free loopback port with
// its own config and storage under t.TempDir, with basic auth when auth is
// set, and returns its host:port. The process is stopped when the test
// ends.
func startRegistry(t *testing.T, auth bool) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err != nil {
		testutil.Unavailable(t, "docker-registry is not installed (apt-get install docker-registry; scripts/setup-backends.sh does it)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	if auth {
		pw := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(pw, []byte(pullUser+":"+pullHash+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: corral-test\n    path: %s\n", pw)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	var logBuf strings.Builder
	var mu sync.Mutex
	cmd.Stdout = writerFunc(func(b []byte) { mu.Lock(); logBuf.Write(b); mu.Unlock() })
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	// Hang guard, not a verdict: wait until /v2/ answers (200, or 401
	// with auth).
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		select {
		case <-done:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("docker-registry exited: %s", logBuf.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry did not answer on %s within 30s", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return addr
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// dockerCLI runs the docker CLI (the test's own setup: commit, push, rmi).
func dockerCLI(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// dockerConfig writes a Docker config dir whose auths entry for reg holds
// user:pass, base64 as docker login writes it.
func dockerConfig(t *testing.T, reg, user, pass string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg, base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pushTestImage makes an image of its own from the test image (one extra
// layer of random bytes, so a pull downloads something), pushes it to the
// registry as ref and removes it from the engine.
func pushTestImage(t *testing.T, ref, configDir string) {
	t.Helper()
	name := "corral-pull-src-" + runID
	dockerCLI(t, "run", "--name", name, testImage, "sh", "-c", "head -c 262144 /dev/urandom > /pulled-layer")
	dockerCLI(t, "commit", name, ref)
	dockerCLI(t, "rm", "-f", name)
	args := []string{"push", ref}
	if configDir != "" {
		args = append([]string{"--config", configDir}, args...)
	}
	dockerCLI(t, args...)
	dockerCLI(t, "rmi", ref)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
}

// progress records OnPull steps.
type progress struct {
	mu    sync.Mutex
	steps []docker.PullProgress
}

func (p *progress) on(s docker.PullProgress) {
	p.mu.Lock()
	p.steps = append(p.steps, s)
	p.mu.Unlock()
}

func (p *progress) take() []docker.PullProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.steps
	p.steps = nil
	return s
}

// createDestroy creates a sandbox and destroys it at once (so the image
// can be removed afterwards).
func createDestroy(t *testing.T, p *docker.Provider) error {
	t.Helper()
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		return err
	}
	if err := h.Destroy(context.Background()); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	return nil
}

func TestPullPolicy(t *testing.T) {
	requireDocker(t)
	reg := startRegistry(t, false)
	ref := reg + "/corral-pull-test:" + runID
	pushTestImage(t, ref, "")

	var pr progress
	p := newProvider(t, docker.Options{Image: ref, OnPull: pr.on}) // default: missing
	// The same steps reach the context's progress function (a run's
	// sandbox.progress events).
	var ctxSteps []sandbox.ProgressStep
	pctx := sandbox.WithProgress(context.Background(), func(s sandbox.ProgressStep) { ctxSteps = append(ctxSteps, s) })
	h, err := p.Create(pctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatalf("Create with pull policy missing: %v", err)
	}
	if err := h.Destroy(context.Background()); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	steps := pr.take()
	t.Logf("progress through the context: %d steps of %d", len(ctxSteps), len(steps))
	if len(ctxSteps) != len(steps) {
		t.Errorf("the context's progress function saw %d steps, OnPull %d", len(ctxSteps), len(steps))
	}
	for i := range min(len(ctxSteps), len(steps)) {
		if c, o := ctxSteps[i], steps[i]; c.Phase != "pull" || c.Subject != o.Image || c.Where != o.Registry || c.Part != o.Layer || c.Status != o.Status {
			t.Errorf("step %d: context %+v, OnPull %+v", i, c, o)
		}
	}
	layers := map[string]bool{}
	complete := 0
	for _, s := range steps {
		if s.Registry != reg || s.Image != ref {
			t.Errorf("step names image %q registry %q, want %q %q", s.Image, s.Registry, ref, reg)
		}
		if s.Layer != "" {
			layers[s.Layer] = true
		}
		if s.Status == "Pull complete" {
			complete++
		}
	}
	t.Logf("missing, image absent: %d progress steps, %d layers, %d pulled (Pull complete)", len(steps), len(layers), complete)
	if complete == 0 {
		t.Errorf("no layer was pulled; steps: %v", steps)
	}
	// A step per state change, never per byte: at most a handful a layer.
	if len(steps) > 12*len(layers)+6 {
		t.Errorf("%d steps for %d layers: a flood, not one line per state change", len(steps), len(layers))
	}

	if err := createDestroy(t, p); err != nil {
		t.Fatal(err)
	}
	t.Logf("missing, image present: %d progress steps", len(pr.take()))

	pa := newProvider(t, docker.Options{Image: ref, Pull: docker.PullAlways, OnPull: pr.on})
	if err := createDestroy(t, pa); err != nil {
		t.Fatalf("Create with pull policy always: %v", err)
	}
	steps = pr.take()
	t.Logf("always, image present: %d progress steps (pulled again), last %q", len(steps), lastStatus(steps))
	if len(steps) == 0 {
		t.Error("pull policy always did not pull")
	}

	dockerCLI(t, "rmi", ref)
	pn := newProvider(t, docker.Options{Image: ref, Pull: docker.PullNever, OnPull: pr.on})
	err = createDestroy(t, pn)
	wantCode(t, "Create with pull policy never", err, sandbox.NotFound)
	if err != nil && !strings.Contains(err.Error(), "pull policy is never") {
		t.Errorf("error does not name the policy: %v", err)
	}
	t.Logf("never, image absent: %d progress steps, error: %v", len(pr.take()), err)

	missingRef := reg + "/corral-pull-test:no-such-tag"
	err = createDestroy(t, newProvider(t, docker.Options{Image: missingRef}))
	wantCode(t, "Create of an unknown tag", err, sandbox.NotFound)
	wantNames(t, err, missingRef, reg)
	t.Logf("unknown tag: %v", err)

	dead := deadAddr(t)
	err = createDestroy(t, newProvider(t, docker.Options{Image: dead + "/corral-pull-test:x"}))
	wantCode(t, "Create from an unreachable registry", err, sandbox.Unavailable)
	wantNames(t, err, dead+"/corral-pull-test:x", dead)
	t.Logf("unreachable registry: %v", err)
}

func TestPullAuth(t *testing.T) {
	requireDocker(t)
	reg := startRegistry(t, true)
	ref := reg + "/corral-pull-auth:" + runID
	good := dockerConfig(t, reg, pullUser, pullPass)
	pushTestImage(t, ref, good)

	for _, tc := range []struct {
		name string
		dir  string
		ok   bool
	}{
		{"no credentials", t.TempDir(), false},
		{"wrong password", dockerConfig(t, reg, pullUser, "wrong-secret-xyz"), false},
		{"credentials from the Docker config", good, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pr progress
			err := createDestroy(t, newProvider(t, docker.Options{Image: ref, DockerConfig: tc.dir, OnPull: pr.on}))
			n := len(pr.take())
			if tc.ok {
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				t.Logf("pulled with credentials: %d progress steps", n)
				return
			}
			wantCode(t, "Create", err, sandbox.PermissionDenied)
			wantNames(t, err, ref, reg)
			if err != nil && (strings.Contains(err.Error(), pullPass) || strings.Contains(err.Error(), "wrong-secret-xyz")) {
				t.Errorf("the error holds the password: %v", err)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
}

func lastStatus(s []docker.PullProgress) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1].Status
}

func wantNames(t *testing.T, err error, image, reg string) {
	t.Helper()
	if err == nil {
		return
	}
	if msg := err.Error(); !strings.Contains(msg, image) || !strings.Contains(msg, "registry "+reg) {
		t.Errorf("error does not name image %q and registry %q: %v", image, reg, err)
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
