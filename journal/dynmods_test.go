//go:build linux

package journal_test

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
)

// TestRemountKeepsOptions remounts the host's cgroup v2 hierarchy with the
// options it has (which changes nothing in the kernel: the favordynmods
// state is not touched, and on Linux 6.18 turning it on cannot be undone
// before a reboot, so no test turns it on) and checks that the mount's own
// flags and the superblock's options read back the same.
func TestRemountKeepsOptions(t *testing.T) {
	hc, err := journal.LookHostCgroup()
	if err != nil {
		t.Fatal(err)
	}
	if hc.Mount == "" || os.Geteuid() != 0 {
		testutil.Unavailable(t, "remounting needs a cgroup v2 hierarchy and root")
	}
	if err := journal.RemountAsIs(hc); err != nil {
		t.Fatal(err)
	}
	got, err := journal.LookHostCgroup()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hc, got, cmp.AllowUnexported(journal.HostCgroup{})); diff != "" {
		t.Fatalf("remounting changed the mount (-before +after):\n%s", diff)
	}
	// Asking for what is set is a no-op that needs no remount.
	if hc.FavorDynMods {
		err = hc.EnableFavorDynMods()
	} else {
		err = hc.DisableFavorDynMods()
	}
	if err != nil {
		t.Fatal(err)
	}
}
