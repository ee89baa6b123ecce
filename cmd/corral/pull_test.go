package main

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
)

// TestExecPullFlag: --pull takes missing, always or never, is refused for
// the local provider, and an image the engine has is used without a pull
// under the default.
func TestExecPullFlag(t *testing.T) {
	_, errOut, code := corral(t, "exec", "--provider", "local", "--pull", "never", "--", "true")
	if code != 125 || !strings.Contains(errOut, "--pull") {
		t.Errorf("--pull with local: exit %d %q", code, errOut)
	}
	testutil.NeedDocker(t)
	_, errOut, code = corral(t, "exec", "--provider", "docker", "--image", testutil.DockerTestImage, "--pull", "sometimes", "--", "true")
	if code != 125 || !strings.Contains(errOut, "--pull") || !strings.Contains(errOut, "missing, always or never") {
		t.Errorf("--pull sometimes: exit %d %q", code, errOut)
	}
	for _, policy := range []string{"", "missing", "never"} {
		args := []string{"exec", "--provider", "docker", "--image", testutil.DockerTestImage}
		if policy != "" {
			args = append(args, "--pull", policy)
		}
		out, errOut, code := corral(t, append(args, "--", "echo", "ok")...)
		if code != 0 || out != "ok\n" || strings.Contains(errOut, "corral: pull") {
			t.Errorf("--pull %q with a present image: exit %d out %q stderr %q (want no pull)", policy, code, out, errOut)
		}
	}
}

func TestPullPrinter(t *testing.T) {
	var b strings.Builder
	pr := pullPrinter(&b)
	pr(docker.PullProgress{Image: "node:22", Registry: "docker.io", Status: "Pulling from library/node"}.String())
	pr(docker.PullProgress{Image: "node:22", Registry: "docker.io", Layer: "a1b2", Status: "Pull complete"}.String())
	want := "corral: pull node:22: Pulling from library/node\ncorral: pull node:22 a1b2: Pull complete\n"
	if b.String() != want {
		t.Errorf("printed %q, want %q", b.String(), want)
	}
}
