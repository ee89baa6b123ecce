package sbx_test

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/sbx"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider and journal suites against the real Docker
// Sandboxes on this machine when `sbx ls --json` answers (sbx on PATH,
// logged in, a hypervisor); otherwise it skips, naming the gate — the one
// skip allowed under CI=true.
func TestLive(t *testing.T) {
	bin, err := exec.LookPath("sbx")
	if err != nil {
		t.Skip("live: no sbx on PATH (the gate is `sbx ls --json` answering)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, bin, "ls", "--json").CombinedOutput(); err != nil {
		t.Skipf("live: `sbx ls --json` does not answer (%v): %s", err, out)
	}
	p, err := sbx.New(sbx.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
	journaltest.Run(t, journaltest.Harness{Provider: p})
}
