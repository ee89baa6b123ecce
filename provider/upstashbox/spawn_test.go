package upstashbox_test

import (
	"bufio"
	"strconv"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/sandbox"
)

// TestSpawnArgvOnlyInCommand: of a spawned command, only the command's
// own process carries its argv; the launcher and the waiter do not, so
// something in the box that kills by argv (journaltest's
// follow/FollowerShellKilled) cannot kill them before they recorded what
// the follower needs. Before, the waiter carried it (2 processes).
func TestSpawnArgvOnlyInCommand(t *testing.T) {
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{ID: "argv"})
	const mark = "argvmark-3b7f1c"
	pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"sh", "-c", "echo started; sleep 60; echo end", mark}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.Kill(ctx, 0) })
	if l, err := bufio.NewReader(pr.Stdout()).ReadString('\n'); err != nil || l != "started\n" {
		t.Fatalf("first line %q (%v)", l, err)
	}
	// The pattern is assembled at run time so the scan's argv does not match it.
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `n=0
for f in /proc/[0-9]*/cmdline; do tr '\000' ' ' <"$f" 2>/dev/null | grep -q -- "$1$2" && n=$((n+1)); done
echo $n`, "scan", mark[:4], mark[4:]}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("scan: %v %+v", err, res)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	t.Logf("processes carrying the spawned argv: %d (want 1, the command)", n)
	if n != 1 {
		t.Errorf("%d processes carry the spawned command's argv, want 1", n)
	}
	if err := pr.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
}
