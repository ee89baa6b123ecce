package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
)

func TestExecDocker(t *testing.T) {
	testutil.NeedDocker(t)
	// The container's hostname is its id: check that this very container
	// is gone (other tests make and remove containers meanwhile).
	out, errOut, code := corral(t, "exec", "--provider", "docker", "--image", testutil.DockerTestImage, "--", "sh", "-c", "echo hi; hostname >&2; exit 4")
	if out != "hi\n" || code != 4 {
		t.Errorf("stdout %q exit %d, want hi and 4", out, code)
	}
	id := strings.TrimSpace(errOut)
	if left, err := exec.Command("docker", "ps", "-aq", "--filter", "id="+id).Output(); err != nil || len(strings.TrimSpace(string(left))) != 0 || id == "" {
		t.Errorf("container %q left behind after exec: %q %v", id, left, err)
	}
	out, _, code = corral(t, "exec", "--provider", "docker", "--image", testutil.DockerTestImage, "--network", "none", "--", "ls", "/sys/class/net")
	if strings.Fields(out)[0] != "lo" || len(strings.Fields(out)) != 1 || code != 0 {
		t.Errorf("--network none: %q (exit %d), want only lo", out, code)
	}
	out, _, _ = corral(t, "exec", "--provider", "docker", "--image", testutil.DockerTestImage, "--", "ls", "/sys/class/net")
	if !strings.Contains(out, "lo") || len(strings.Fields(out)) < 2 {
		t.Errorf("default network: %q, want lo and the container's interface", out)
	}
	_, errOut, code = corral(t, "exec", "--provider", "docker", "--image", "corral-no-such-image:1", "--pull", "never", "--", "true")
	if code != 125 || !strings.Contains(errOut, "pull policy is never") {
		t.Errorf("missing image: exit %d %q", code, errOut)
	}
	_, errOut, code = corral(t, "exec", "--provider", "docker", "--", "true")
	if code != 125 || !strings.Contains(errOut, "--image is required") {
		t.Errorf("no image: exit %d %q", code, errOut)
	}
}

func TestSandboxCommands(t *testing.T) {
	testutil.NeedDocker(t)
	out, errOut, code := corral(t, "exec", "--keep", "--provider", "docker", "--image", testutil.DockerTestImage, "--", "sh", "-c", "echo kept > /workspace/f")
	if code != 0 {
		t.Fatalf("exec --keep: %d %s", code, errOut)
	}
	_ = out
	id := strings.Fields(errOut[strings.Index(errOut, "sandbox kept: ")+len("sandbox kept: "):])[0]
	t.Cleanup(func() { corral(t, "sandbox", "rm", id) })
	ls, _, code := corral(t, "sandbox", "ls")
	if code != 0 || !strings.Contains(ls, id) {
		t.Errorf("sandbox ls does not list %s:\n%s", id, ls)
	}
	snap, errOut, code := corral(t, "sandbox", "snapshot", id, "--label", "cli")
	if code != 0 || !strings.HasPrefix(snap, "corral-snapshot") {
		t.Fatalf("snapshot: %q %s", snap, errOut)
	}
	fork, errOut, code := corral(t, "sandbox", "fork", id)
	fork = strings.TrimSpace(fork)
	if code != 0 || fork == "" || fork == id {
		t.Fatalf("fork: %q %s", fork, errOut)
	}
	if cat, err := exec.Command("docker", "exec", fork, "cat", "/workspace/f").Output(); err != nil || string(cat) != "kept\n" {
		t.Errorf("the fork lacks the file: %q %v", cat, err)
	}
	if _, errOut, code := corral(t, "sandbox", "rm", fork, id); code != 0 {
		t.Errorf("rm: %s", errOut)
	}
	if ls, _, _ := corral(t, "sandbox", "ls"); strings.Contains(ls, id) || strings.Contains(ls, fork) {
		t.Errorf("still listed after rm:\n%s", ls)
	}
	// A real prune would also remove what tests running in parallel use:
	// a dry run shows the snapshot would go.
	rep, errOut, code := corral(t, "sandbox", "prune", "--dry-run")
	if code != 0 || !strings.Contains(rep, strings.TrimSpace(snap)) {
		t.Errorf("prune --dry-run does not name %s: %q %s", snap, rep, errOut)
	}
	_ = exec.Command("docker", "rmi", strings.TrimSpace(snap)).Run()
}
