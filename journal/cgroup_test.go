//go:build linux

package journal_test

import (
	"context"
	"fmt"
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
			ctx, lh := newLocalHandle(t)
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
					b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
					if err != nil {
						continue
					}
					for _, f := range strings.Fields(string(b)) { // the agent, not only a wrapper started in it
						if comm, _ := os.ReadFile("/proc/" + f + "/comm"); strings.TrimSpace(string(comm)) == "sleep" {
							cg = d
							return true, nil
						}
					}
				}
				return false, nil
			})
			// The wrapper's pid from its start line ({"__start":PID,...}): the
			// cgroup's name ends in it only where the wrapper made it (a
			// wrapper started in it by the host has a random suffix).
			jb, err := os.ReadFile(p.Journal)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(jb), ",")
			wpid, err := strconv.Atoi(strings.TrimPrefix(first, `{"__start":`))
			if err != nil || wpid <= 1 {
				t.Fatalf("no wrapper pid in the start line %q: %v", first, err)
			}
			if tc.name == "host" {
				// Started in its cgroup by the local handle (spawnWrapper).
				if own, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", wpid)); !strings.Contains(string(own), "/"+filepath.Base(cg)+"\n") {
					t.Fatalf("the wrapper is not in the run's cgroup %s: %q", cg, own)
				}
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
				return os.IsNotExist(err) || err == nil && len(strings.TrimSpace(string(b))) == 0, nil
			})
			if _, err := os.Stat(cg); os.IsNotExist(err) && tc.name == "host" {
				// A wrapper the local handle started in its cgroup has the
				// cgroup removed by the spawner when the wrapper's end finds
				// it empty (best effort: here the agent outlived the
				// wrapper only for a moment); a daemon that died first
				// leaves it for Remove, as this one (made by hand, the
				// spawner's form) stands for.
				cg = filepath.Join(base, "corral-"+p.Token+"-987654321")
				if err := os.Mkdir(cg, 0o755); err != nil {
					t.Fatal(err)
				}
				journal.ForgetBornCgroup(p.Token)
			}
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

// TestWrapperBornInRunCgroup: on the local provider the wrapper is started
// in the run's cgroup (corral-TOKEN-<nine digits>), so the agent is in it
// from its start; a run whose agent left nothing behind ends with the
// cgroup removed by the spawner, and one whose agent left a background
// process ends with that process killed (the wrapper leaves the cgroup to
// kill it whole) and the cgroup removed too.
func TestWrapperBornInRunCgroup(t *testing.T) {
	if journal.CgroupV2Root() == "" || journal.OwnCgroup() == "" {
		testutil.Unavailable(t, "no cgroup v2 mount here, or this process is in none")
	}
	ctx, h := newLocalHandle(t)
	base := filepath.Join(journal.CgroupV2Root(), journal.OwnCgroup())
	for _, tc := range []struct{ name, script string }{
		{"clean", `grep '^0::' /proc/self/cgroup`},
		{"leftover", `grep '^0::' /proc/self/cgroup; sleep 600 >/dev/null 2>&1 & echo "bg $!"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := journal.PathsFor(t.TempDir(), "born-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			exited, err := journal.StartWatch(ctx, h, journal.Spec{Paths: p, Nonce: journal.NewNonce(), Agent: sandbox.Command{Args: []string{"sh", "-c", tc.script}}})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-ctx.Done():
				t.Fatal("the wrapper did not exit")
			}
			out, err := os.ReadFile(p.Journal)
			if err != nil {
				t.Fatal(err)
			}
			var cg string
			bg := 0
			for _, l := range strings.Split(string(out), "\n") {
				if rest, ok := strings.CutPrefix(l, "0::"); ok {
					cg = filepath.Join(journal.CgroupV2Root(), rest)
				}
				if rest, ok := strings.CutPrefix(l, "bg "); ok {
					bg, _ = strconv.Atoi(rest)
				}
			}
			suffix, ok := strings.CutPrefix(filepath.Base(cg), "corral-"+p.Token+"-")
			if filepath.Dir(cg) != base || !ok || len(suffix) != 9 || strings.Trim(suffix, "0123456789") != "" {
				t.Fatalf("the agent ran in %q, want %s/corral-%s-<nine digits> (journal %q)", cg, base, p.Token, out)
			}
			if tc.name == "leftover" {
				if bg <= 0 {
					t.Fatalf("no background pid in %q", out)
				}
				if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", bg)); err == nil && !containsState(st, "Z") {
					t.Fatalf("the agent's background process outlived the run: %s", st)
				}
			}
			testutil.WaitFor(t, ctx, "the run's cgroup to be removed", 20*time.Millisecond, func(context.Context) (bool, error) {
				_, err := os.Stat(cg)
				return os.IsNotExist(err), nil
			})
		})
	}
}

// newLocalHandle is a fresh local sandbox (destroyed at the test's end)
// and a context bounded as a hang guard.
func newLocalHandle(t *testing.T) (context.Context, sandbox.Handle) {
	t.Helper()
	lp, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	h, err := lp.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return ctx, h
}

// containsState reports whether a /proc/PID/stat line has the state s.
func containsState(stat []byte, s string) bool {
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && strings.HasPrefix(string(stat[i+1:]), " "+s)
}
