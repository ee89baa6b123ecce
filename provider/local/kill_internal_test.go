//go:build linux

package local

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// TestKillFindsMembersOutsideTheTree attacks the kill wait's shortcut of
// watching the leader's descendants: a subshell's orphan (already
// reparented away from the leader when the signal comes) is in the group
// but not in the tree, and the wait must still not return while it lives.
// A member that ignores SIGTERM forces the SIGKILL step too.
func TestKillFindsMembersOutsideTheTree(t *testing.T) {
	ctx := context.Background()
	p, err := New(Options{BaseDir: t.TempDir(), KillGrace: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(ctx) })
	for _, tc := range []struct{ name, shell string }{
		{"orphan", `(sleep 60 </dev/null >/dev/null 2>&1 &) ; echo started; sleep 60`},
		{"orphan ignoring TERM", `(trap '' TERM; (sleep 60 </dev/null >/dev/null 2>&1 &); echo started); sleep 60`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := h.Spawn(ctx, sandbox.Command{Shell: tc.shell})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 8)
			if _, err := pr.Stdout().Read(buf); err != nil {
				t.Fatal(err)
			}
			pgid := pr.PID()
			members := scanGroup(pgid, false)
			inTree := len(liveAmong(pgid, descendants(pgid)))
			if err := pr.Kill(ctx, 0); err != nil {
				t.Fatal(err)
			}
			left := scanGroup(pgid, false)
			t.Logf("members before kill %d (in the leader's tree %d), live after Kill %d", len(members), inTree, len(left))
			if len(left) > 0 {
				t.Errorf("Kill returned with live members %v", left)
			}
		})
	}
}

// TestLiveAmong shows that a watched pid counts only while it is a live
// member of the group: not once it is gone, and not when its number
// belongs to a process of another group.
func TestLiveAmong(t *testing.T) {
	self, pgrp := os.Getpid(), syscall.Getpgrp()
	if got := liveAmong(pgrp+1, []int{self}); len(got) != 0 {
		t.Errorf("own pid counted in a foreign group: %v", got)
	}
	if got := liveAmong(pgrp, []int{self, 1 << 30}); len(got) != 1 || got[0] != self {
		t.Errorf("liveAmong(own group, [self, absent]) = %v", got)
	}
}
