package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/store/pgstore"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
)

// cli runs corral with extra environment and returns stdout, stderr and the
// exit code.
func cli(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(corralBin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "corral.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestUpCreatesThenResumes(t *testing.T) {
	repo := testutil.BareRepo(t, map[string]string{"README.md": "from git\n"})
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf(`id: up
provider: {name: local, local: {baseDir: %s}}
workspace:
  source: {git: %s}
  setup:
    - echo made > setup.txt
`, filepath.Join(dir, "sb"), repo))
	env := []string{"XDG_STATE_HOME=" + dir}
	out, errOut, code := cli(t, env, "up", "--config", cfg, "--thread", "t1")
	if code != 0 || !strings.Contains(out, "created ") || !strings.Contains(out, "setup 1/1: echo made > setup.txt") {
		t.Fatalf("first up: exit %d\n%s%s", code, out, errOut)
	}
	id := strings.TrimSpace(out[strings.LastIndex(out, "created ")+len("created "):])
	for _, f := range []string{"README.md", "setup.txt"} {
		if _, err := os.Stat(filepath.Join(id, f)); err != nil {
			t.Errorf("%s missing in %s: %v", f, id, err)
		}
	}
	out, _, code = cli(t, env, "up", "--config", cfg, "--thread", "t1")
	if code != 0 || strings.TrimSpace(out) != "resumed "+id {
		t.Fatalf("second up: exit %d %q", code, out)
	}
	out, _, code = cli(t, env, "down", "--config", cfg, "--thread", "t1")
	if code != 0 || !strings.Contains(out, "destroyed") {
		t.Fatalf("down: %d %q", code, out)
	}
	if _, err := os.Stat(id); !os.IsNotExist(err) {
		t.Errorf("sandbox still there after down")
	}
}

// TestUpRestoredOnDocker removes the container behind corral's back: the
// next up restores the snapshot taken after setup, without running setup
// again.
func TestUpRestoredOnDocker(t *testing.T) {
	testutil.NeedDocker(t)
	repo := testutil.BareRepo(t, map[string]string{"README.md": "from git\n"})
	dir := t.TempDir()
	marker := filepath.Join(dir, "setup-runs")
	cfg := writeConfig(t, fmt.Sprintf(`id: up-docker
provider: {name: docker, docker: {image: %s}}
workspace:
  source: {git: %s}
  setup:
    - echo made > setup.txt
`, testutil.DockerTestImage, repo))
	_ = marker
	env := []string{"XDG_STATE_HOME=" + dir}
	t.Cleanup(func() { cli(t, env, "down", "--config", cfg, "--thread", "t1") })
	out, errOut, code := cli(t, env, "up", "--config", cfg, "--thread", "t1")
	if code != 0 || !strings.Contains(out, "created ") {
		t.Fatalf("first up: exit %d\n%s%s", code, out, errOut)
	}
	id := strings.TrimSpace(out[strings.LastIndex(out, "created ")+len("created "):])
	if out, err := exec.Command("docker", "rm", "-f", id).CombinedOutput(); err != nil {
		t.Fatalf("docker rm: %v %s", err, out)
	}
	out, errOut, code = cli(t, env, "up", "--config", cfg, "--thread", "t1")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), "restored ") || strings.Contains(out, "setup 1/1") {
		t.Fatalf("up after docker rm: exit %d\n%s%s", code, out, errOut)
	}
	newID := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(out), "restored "))
	cat, err := exec.Command("docker", "exec", newID, "cat", "/workspace/setup.txt", "/workspace/README.md").CombinedOutput()
	if err != nil || string(cat) != "made\nfrom git\n" {
		t.Errorf("files after restore: %q %v", cat, err)
	}
}

// TestConcurrentUpCreatesOnce starts two "corral up" for one thread at the
// same moment against one PostgreSQL: exactly one sandbox is created.
func TestConcurrentUpCreatesOnce(t *testing.T) {
	pg := pgtest.URL(t)
	dir := t.TempDir()
	cfg := writeConfig(t, fmt.Sprintf("id: race\nprovider: {name: local, local: {baseDir: %s}}\nworkspace:\n  setup: [sleep 0.5]\n", filepath.Join(dir, "sb")))
	schema := pgtest.FreshSchema(t, pg)
	url := pg + "&search_path=" + schema
	if !strings.Contains(pg, "?") {
		url = pg + "?search_path=" + schema
	}
	// The schema must exist; the two processes then race on everything else.
	st, err := pgstore.Open(context.Background(), pg, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		wg.Go(func() {
			out, errOut, code := cli(t, nil, "up", "--config", cfg, "--store", url, "--thread", "t1")
			if code != 0 {
				t.Errorf("up %d: exit %d %s", i, code, errOut)
			}
			outs[i] = out
		})
	}
	wg.Wait()
	joined := outs[0] + outs[1]
	if strings.Count(joined, "created ") != 1 || strings.Count(joined, "resumed ") != 1 {
		t.Fatalf("want one created and one resumed:\n%s\n---\n%s", outs[0], outs[1])
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "sb"))
	if len(ents) != 1 {
		t.Errorf("%d sandboxes exist, want 1", len(ents))
	}
}

// TestSecretCanary gives a secret through the config and looks for it
// everywhere it must not be: the store's rows, the CLI's output and logs,
// every process's argv while setup runs and, on Docker, the container's
// configuration and every snapshot image (config and layers).
func TestSecretCanary(t *testing.T) {
	for _, prov := range []string{"local", "docker"} {
		t.Run(prov, func(t *testing.T) { secretCanary(t, prov) })
	}
}

func secretCanary(t *testing.T, prov string) {
	canary := fmt.Sprintf("canary-%d-s3cr3t", time.Now().UnixNano())
	dir := t.TempDir()
	provider := fmt.Sprintf("{name: local, local: {baseDir: %s}}", filepath.Join(dir, "sb"))
	if prov == "docker" {
		testutil.NeedDocker(t)
		provider = "{name: docker, docker: {image: " + testutil.DockerTestImage + "}}"
	}
	cfg := writeConfig(t, fmt.Sprintf(`id: canary-%s
provider: %s
workspace:
  setup:
    - test "${#API_TOKEN}" = "%d" && sleep 1.5
    - echo "using $API_TOKEN" > /dev/null
  secrets:
    API_TOKEN: {env: CORRAL_T_CANARY_SRC}
`, prov, provider, len(canary)))
	db := filepath.Join(dir, "state.db")
	env := []string{"CORRAL_T_CANARY_SRC=" + canary, "CORRAL_LOG=debug", "XDG_STATE_HOME=" + dir}
	t.Cleanup(func() { cli(t, env, "down", "--config", cfg, "--store", "sqlite:"+db, "--thread", "t1") })

	stop := make(chan struct{})
	var psHits []string
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			out, _ := exec.Command("ps", "-eo", "args").Output()
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, canary) {
					psHits = append(psHits, l)
				}
			}
		}
	})
	out, errOut, code := cli(t, env, "up", "--config", cfg, "--store", "sqlite:"+db, "--thread", "t1")
	close(stop)
	wg.Wait()
	if code != 0 {
		t.Fatalf("up: exit %d\n%s%s", code, out, errOut)
	}
	lastLine := strings.TrimSpace(out)
	lastLine = lastLine[strings.LastIndex(lastLine, "\n")+1:]
	id := strings.TrimPrefix(lastLine, "created ")
	out2, errOut2, _ := cli(t, env, "run", "--config", cfg, "--store", "sqlite:"+db, "--thread", "t1", "--", "sh", "-c", fmt.Sprintf(`test "${#API_TOKEN}" = %d && echo secret-ok`, len(canary)))
	if !strings.Contains(out2, "secret-ok") {
		t.Errorf("the run did not see the secret: %q %q", out2, errOut2)
	}
	psJSON, _, _ := cli(t, env, "ps", "--all", "--json", "--store", "sqlite:"+db)
	for name, text := range map[string]string{"up stdout": out, "up stderr": errOut, "run stdout": out2, "run stderr": errOut2, "ps --json": psJSON} {
		if strings.Contains(text, canary) {
			t.Errorf("the canary is in the %s", name)
		}
	}
	for _, f := range []string{db, db + "-wal", db + "-shm"} {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(canary)) {
			t.Errorf("the canary is in %s", filepath.Base(f))
		}
	}
	if len(psHits) > 0 {
		t.Errorf("the canary was in a process's argv %d times, e.g. %.300q", len(psHits), psHits[0])
	}
	if prov != "docker" {
		return
	}
	inspect, err := exec.Command("docker", "inspect", id).CombinedOutput()
	if err != nil {
		t.Fatalf("docker inspect %s: %v %s", id, err, inspect)
	}
	if bytes.Contains(inspect, []byte(canary)) {
		t.Error("the canary is in docker inspect of the container")
	}
	images, err := exec.Command("docker", "image", "ls", "-q", "--filter", "label=dev.corral.managed=true").Output()
	if err != nil {
		t.Fatal(err)
	}
	if len(strings.Fields(string(images))) == 0 {
		t.Fatal("no snapshot image was taken after setup")
	}
	for _, img := range strings.Fields(string(images)) {
		cfgJSON, _ := exec.Command("docker", "image", "inspect", img).Output()
		if bytes.Contains(cfgJSON, []byte(canary)) {
			t.Errorf("the canary is in the config of image %s", img)
		}
		tar, err := exec.Command("docker", "save", img).Output()
		if err != nil {
			if exec.Command("docker", "image", "inspect", img).Run() != nil {
				continue // removed meanwhile by a test running in parallel
			}
			t.Fatalf("docker save %s: %v", img, err)
		}
		if bytes.Contains(tar, []byte(canary)) {
			t.Errorf("the canary is in the layers of image %s", img)
		}
	}
}
