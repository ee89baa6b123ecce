//go:build linux

package journal_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

// shellOnly hides the local handle's host paths (it has no Unwrap), so
// journal operations take the path of a sandbox whose files are not the
// host's.
type shellOnly struct{ sandbox.Handle }

// TestRemoveDropsKilledWrappersCgroup: a wrapper SIGKILLed while its
// agent ran leaves the run's cgroup corral-TOKEN-PID behind; once it is
// empty, Remove deletes it, on the host path and on the shell path, and
// leaves alone the cgroups of a run whose token begins with this one's
// and names of another form.
func TestRemoveDropsKilledWrappersCgroup(t *testing.T) {
	root := journal.CgroupV2Root()
	own := journal.OwnCgroup()
	if root == "" || own == "" {
		testutil.Unavailable(t, "no cgroup v2 mount here, or this process is in none")
	}
	base := filepath.Join(root, own)
	probe := filepath.Join(base, "corral-probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		testutil.Unavailable(t, "cannot make a cgroup under "+base+": "+err.Error())
	}
	_ = os.Remove(probe)
	for _, tc := range []struct {
		name string
		wrap func(sandbox.Handle) sandbox.Handle
	}{
		{"host", func(h sandbox.Handle) sandbox.Handle { return h }},
		{"shell", func(h sandbox.Handle) sandbox.Handle { return shellOnly{h} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lp, err := local.New(local.Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			lh, err := lp.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lh.Destroy(context.Background()) })
			h := tc.wrap(lh)
			p, err := journal.PathsFor(t.TempDir(), "cg-run-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			// Decoys: another run's cgroup whose token extends this one's,
			// and a name of another form.
			var decoys []string
			for _, n := range []string{"corral-" + p.Token + "-x-12", "corral-" + p.Token + "-12x"} {
				d := filepath.Join(base, n)
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
				decoys = append(decoys, d)
				t.Cleanup(func() { _ = os.Remove(d) })
			}
			nonce := journal.NewNonce()
			if err := journal.Start(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: sandbox.Command{Args: []string{"sleep", "600"}}}); err != nil {
				t.Fatal(err)
			}
			var cg string
			testutil.WaitFor(t, ctx, "the run's cgroup with the agent in it", 20*time.Millisecond, func(context.Context) (bool, error) {
				m, _ := filepath.Glob(filepath.Join(base, "corral-"+p.Token+"-[0-9]*"))
				for _, d := range m {
					if b, err := os.ReadFile(filepath.Join(d, "cgroup.procs")); err == nil && len(strings.TrimSpace(string(b))) > 0 {
						cg = d
						return true, nil
					}
				}
				return false, nil
			})
			wpid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(cg), "corral-"+p.Token+"-"))
			if err != nil {
				t.Fatal(err)
			}
			// The wrapper dies without its clean-up; then its agent.
			if err := syscall.Kill(wpid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			testutil.WaitFor(t, ctx, "the cgroup to empty", 20*time.Millisecond, func(context.Context) (bool, error) {
				b, err := os.ReadFile(filepath.Join(cg, "cgroup.procs"))
				return err == nil && len(strings.TrimSpace(string(b))) == 0, nil
			})
			if _, err := os.Stat(cg); err != nil {
				t.Fatalf("the killed wrapper's cgroup is not there to clean: %v", err)
			}
			if err := journal.Remove(ctx, h, p); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(cg); !os.IsNotExist(err) {
				t.Errorf("%s left after Remove (%v)", cg, err)
			}
			for _, d := range decoys {
				if _, err := os.Stat(d); err != nil {
					t.Errorf("Remove took %s, not its run's: %v", d, err)
				}
			}
		})
	}
}
