package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// testImage is the image the tests run; scripts/docker-test-image.sh
// builds it from the host's static BusyBox.
var testImage = envOr("CORRAL_DOCKER_TEST_IMAGE", "corral-test-base")

// runLabel marks every container and image this test binary makes, so the
// end of the run can prove nothing was left behind.
const runLabel = "dev.corral.test-run"

var runID = func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// gate checks once whether an engine and the test image are there.
var gate = sync.OnceValue(func() error {
	p, err := docker.New(docker.Options{Image: testImage})
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return err // names the engine's address
	}
	if err := p.CheckImage(ctx); err != nil {
		return fmt.Errorf("docker: the test image %s is missing; build it with scripts/docker-test-image.sh: %w", testImage, err)
	}
	return nil
})

// requireDocker skips the test when no engine or test image is there, and
// fails it instead under CI=true.
func requireDocker(t testing.TB) {
	t.Helper()
	if err := gate(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err.Error())
	}
}

// newProvider returns a provider for the test image whose containers carry
// the run label.
func newProvider(t testing.TB, opts docker.Options) *docker.Provider {
	t.Helper()
	requireDocker(t)
	if opts.Image == "" {
		opts.Image = testImage
	}
	labels := map[string]string{runLabel: runID}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	opts.Labels = labels
	p, err := docker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// apiClient is a plain Engine API client for checks behind corral's back.
func apiClient(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestMain removes the snapshot images the run made (the suite's snapshots
// outlive their sandboxes by design) and fails the run if any container
// was left behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if gate() == nil {
		if err := sweep(); err != nil {
			fmt.Fprintln(os.Stderr, "docker tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func sweep() error {
	p, err := docker.New(docker.Options{Image: testImage})
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var left []string
	boxes, err := p.List(ctx)
	if err != nil {
		return err
	}
	for _, b := range boxes {
		if b.Labels[runLabel] == runID {
			left = append(left, b.ID)
		}
	}
	rep, err := p.Prune(ctx, docker.PruneOptions{Labels: map[string]string{runLabel: runID}})
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	if len(rep.Sandboxes) > 0 || len(left) > 0 {
		return fmt.Errorf("tests left containers behind: %s", strings.Join(left, ", "))
	}
	return nil
}

func containerID(t testing.TB, h sandbox.Handle) string {
	t.Helper()
	id, ok := docker.ContainerID(h)
	if !ok {
		t.Fatalf("%T is not a docker handle", h)
	}
	return id
}
