package qemu_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/sandbox"
)

func TestBootExec(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	t0 := time.Now()
	h := testutil.Create(t, p, sandbox.CreateOptions{Env: map[string]string{"GREETING": "hi there"}})
	t.Logf("accel %s, create %v", p.Accel(), time.Since(t0))
	ctx := context.Background()
	res, err := h.Exec(ctx, sandbox.Command{Shell: `echo "$GREETING"; pwd; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "hi there\n/workspace\n" || res.ExitCode != 3 {
		t.Fatalf("stdout %q code %d stderr %q", got, res.ExitCode, res.Stderr)
	}
	if err := h.FS().WriteFile(ctx, "a/b.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b, err := h.FS().ReadFile(ctx, "a/b.txt")
	if err != nil || string(b) != "x" {
		t.Fatalf("ReadFile %q %v", b, err)
	}
	res, err = h.Exec(ctx, sandbox.Command{Args: []string{"date", "+%s"}})
	if err != nil || !strings.HasPrefix(string(res.Stdout), "1") {
		t.Fatalf("date: %v %q", err, res.Stdout)
	}
}

// TestDockerImageRoot boots a VM whose root is a local Docker image
// (docker export, cached by image id): the test image of provider/docker.
func TestDockerImageRoot(t *testing.T) {
	image := os.Getenv("CORRAL_DOCKER_TEST_IMAGE")
	if image == "" {
		image = "corral-test-base"
	}
	if err := exec.Command("docker", "image", "inspect", image).Run(); err != nil {
		msg := "no local Docker image " + image + " (scripts/docker-test-image.sh builds it)"
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: " + msg)
		}
		t.Skip(msg)
	}
	p := newProvider(t, qemu.Options{Image: image})
	ctx := context.Background()
	h := testutil.Create(t, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	res, err := h.Exec(ctx, sandbox.Command{Shell: "cat /etc/passwd | head -1; test -d /workspace && echo ws"})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); !strings.HasPrefix(got, "root:") || !strings.HasSuffix(got, "ws\n") {
		t.Fatalf("stdout %q stderr %q", got, res.Stderr)
	}
}
