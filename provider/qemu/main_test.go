package qemu_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/qemu"
)

// agentDir holds the guest agent this test binary builds.
var agentDir string

// gate builds the guest agent and checks QEMU and the kernel once.
var gate = sync.OnceValue(func() error {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return fmt.Errorf("qemu: qemu-system-x86_64 not installed (run scripts/setup-qemu.sh): %v", err)
	}
	if _, err := qemu.New(qemu.Options{}); err != nil {
		return fmt.Errorf("qemu: %v (run scripts/setup-qemu.sh)", err)
	}
	out := filepath.Join(agentDir, "corral-guest")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", out, "github.com/d10ffeed/corral/cmd/corral-guest")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("qemu: building the guest agent: %v: %s", err, b)
	}
	return nil
})

// requireQEMU skips the test when QEMU or the kernel is missing, and fails
// it instead under CI=true.
func requireQEMU(t testing.TB) {
	t.Helper()
	if err := gate(); err != nil {
		testutil.Unavailable(t, err.Error())
	}
}

// newProvider returns a provider with the test's agent and small VMs.
func newProvider(t testing.TB, opts qemu.Options) *qemu.Provider {
	t.Helper()
	requireQEMU(t)
	opts.Agent = agentPath()
	p, err := qemu.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func agentPath() string { return filepath.Join(agentDir, "corral-guest") }

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		childMain()
	}
	d, err := os.MkdirTemp("", "corral-qemu-agent-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentDir = d
	start := time.Now()
	code := m.Run()
	_ = os.RemoveAll(d)
	if gate() == nil {
		if err := sweep(start); err != nil {
			fmt.Fprintln(os.Stderr, "qemu tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sweep fails the run if a VM made during it was left behind (and
// destroys it).
func sweep(since time.Time) error {
	p, err := qemu.New(qemu.Options{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := qemu.Managed{Provider: p}.ListSandboxes(ctx)
	if err != nil {
		return err
	}
	var left []string
	for _, s := range list {
		if s.CreatedAt.Before(since) {
			continue
		}
		left = append(left, s.ID)
		_ = p.Destroy(ctx, s.ID)
	}
	// The provider suite keeps the snapshot it restored (its contract is
	// the caller's to delete); remove every snapshot made during the run.
	snaps, err := p.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if !s.CreatedAt.Before(since) {
			_ = p.DeleteSnapshot(ctx, s.ID)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("tests left VMs behind: %v", left)
	}
	return nil
}
