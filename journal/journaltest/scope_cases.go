package journaltest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// The scope cases try every way an agent can leave processes behind and
// check that none survives the end of its run or a cancel: a double fork,
// setsid, a daemon that also clears its environment, a fork bomb. Processes
// are recognised by a random sleep duration that nothing else uses.

func (s *suite) scopeCases(t *testing.T) {
	t.Run("NothingOutlivesTheRun", s.testScopeAfterRun)
	t.Run("NothingOutlivesCancel", s.testScopeCancel)
	t.Run("ForkBomb", s.testScopeForkBomb)
	t.Run("LeftItsCgroup", s.testScopeLeftCgroup)
	t.Run("KeepBackground", s.testScopeKeep)
	t.Run("OtherRunsUntouched", s.testScopeOthers)
}

// mark returns a sleep duration unique to this test, in seconds.
func mark() int { return 4_000_000 + rand.IntN(900_000) }

// leftovers counts live `sleep m` processes in the sandbox (the pattern is
// written so that grep's own command line does not match it, and is
// anchored so a shell whose script mentions the sleep does not count).
func leftovers(t *testing.T, ctx context.Context, h sandbox.Handle, m int) int {
	t.Helper()
	ms := strconv.Itoa(m)
	pat := "^sleep " + ms[:len(ms)-1] + "[" + ms[len(ms)-1:] + "] ?$"
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", countScript, "corral-count", pat}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("counting processes: %q %q", res.Stdout, res.Stderr)
	}
	return n
}

// countScript prints how many live processes have a command line matching
// the extended regular expression $1. (BusyBox grep stops at NUL bytes, so
// each command line is made one line of text first.)
const countScript = `for f in /proc/[0-9]*/cmdline; do tr '\000' ' ' <"$f" 2>/dev/null; echo; done | grep -c -E -- "$1"`

// killMarked kills what a test left on purpose (KeepBackground).
func killMarked(h sandbox.Handle, m int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `for f in /proc/[0-9]*/cmdline; do case "$(tr '\000' ' ' <"$f" 2>/dev/null)" in *" $1"*) p=${f#/proc/}; kill -9 "${p%/cmdline}" ;; esac; done; exit 0`, "corral-kill-marked", strconv.Itoa(m)}})
}

// escapes is shell that leaves three sleeps of duration m behind, each
// escaping further: a double fork (same group and session), setsid (new
// session, marker kept), and setsid with a cleared environment. Then it
// prints its cgroup line, so the test knows whether the run had a cgroup.
func escapes(m int) string {
	return fmt.Sprintf(`(sleep %[1]d &)
setsid sh -c 'sleep %[1]d & exit 0' </dev/null >/dev/null 2>&1
env -i setsid sh -c 'sleep %[1]d & exit 0' </dev/null >/dev/null 2>&1
grep '^0::' /proc/self/cgroup || echo 'no cgroup v2'
`, m)
}

// contained reports whether the run's agent had a cgroup of its own, from
// the line escapes printed.
func contained(lines []journal.Line, p journal.Paths) bool {
	for _, l := range lines {
		if strings.Contains(string(l.Data), "corral-"+p.Token) {
			return true
		}
	}
	return false
}

func (s *suite) startSpec(t *testing.T, ctx context.Context, h sandbox.Handle, spec journal.Spec) (journal.Paths, string) {
	t.Helper()
	p, err := journal.PathsFor("", runID("scope"))
	if err != nil {
		t.Fatal(err)
	}
	spec.Paths, spec.Nonce = p, journal.NewNonce()
	if err := launch(ctx, h, spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, p) })
	return p, spec.Nonce
}

func (s *suite) testScopeAfterRun(t *testing.T) {
	for _, nocg := range []bool{false, true} {
		t.Run(fmt.Sprintf("nocgroup=%v", nocg), func(t *testing.T) {
			ctx, h := s.sandbox(t)
			m := mark()
			t.Cleanup(func() { killMarked(h, m) })
			p, nonce := s.startSpec(t, ctx, h, journal.Spec{Agent: sandbox.Command{Shell: escapes(m) + "exit 3"}, NoCgroup: nocg})
			lines, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
			if err != nil {
				t.Fatal(err)
			}
			if exit.Code != 3 {
				t.Errorf("exit %d, want 3", exit.Code)
			}
			left := leftovers(t, ctx, h, m)
			strong := h.Capabilities().OwnProcessTable || contained(lines, p)
			t.Logf("processes left after the run: %d of 3 started (cgroup: %v, own process table: %v)", left, contained(lines, p), h.Capabilities().OwnProcessTable)
			switch {
			case strong && left != 0:
				t.Errorf("%d processes outlived the run", left)
			case !strong && left > 1:
				// Without a cgroup or a process table of its own, only a
				// process that cleared its environment and left its
				// session escapes (documented).
				t.Errorf("%d processes outlived the run; at most the env -i setsid one may", left)
			}
		})
	}
}

func (s *suite) testScopeCancel(t *testing.T) {
	if !s.h.Provider.Capabilities().KillableProcesses {
		t.Skipf("provider %q does not claim killableProcesses", s.h.Provider.Name())
	}
	ctx, h := s.sandbox(t)
	m := mark()
	t.Cleanup(func() { killMarked(h, m) })
	agent := escapes(m) + fmt.Sprintf("echo ready\nexec sleep %d\n", m)
	p, nonce := s.startSpec(t, ctx, h, journal.Spec{Agent: sandbox.Command{Shell: agent}})
	// Wait for "ready" through the journal, then cancel.
	rctx, stop := context.WithCancel(ctx)
	var lines []journal.Line
	_, _ = reader(h, p, nonce, journal.Poll).Read(rctx, 0, func(l journal.Line) error {
		lines = append(lines, l)
		if string(l.Data) == "ready" {
			stop()
		}
		return nil
	})
	stop()
	if before := leftovers(t, ctx, h, m); before < 3 {
		t.Fatalf("only %d marked processes before cancel, want at least 3", before)
	}
	if err := journal.Kill(ctx, h, p, time.Second); err != nil {
		t.Fatal(err)
	}
	_, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil {
		t.Fatalf("after Kill the wrapper must still record the exit: %v", err)
	}
	left := leftovers(t, ctx, h, m)
	strong := h.Capabilities().OwnProcessTable || contained(lines, p)
	t.Logf("processes left after cancel: %d of 4 started (exit %d)", left, exit.Code)
	if (strong && left != 0) || left > 1 {
		t.Errorf("%d processes outlived cancel", left)
	}
}

func (s *suite) testScopeForkBomb(t *testing.T) {
	ctx, h := s.sandbox(t)
	m := mark()
	t.Cleanup(func() { killMarked(h, m) })
	// Bounded on purpose (the local provider runs on the host): spawners
	// that outlive the agent and keep forking, up to 600 sleeps each.
	bomb := fmt.Sprintf(`for s in 1 2 3; do setsid sh -c 'i=0; while [ $i -lt 600 ]; do sleep %[1]d & i=$((i+1)); done; wait' </dev/null >/dev/null 2>&1 & done
sleep 1
echo bombed
`, m)
	p, nonce := s.startSpec(t, ctx, h, journal.Spec{Agent: sandbox.Command{Shell: bomb}})
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil {
		t.Fatal(err)
	}
	left := leftovers(t, ctx, h, m)
	t.Logf("fork bomb: processes left after the run: %d (exit %d, %d lines)", left, exit.Code, len(lines))
	if left != 0 {
		t.Errorf("%d processes of the fork bomb outlived the run", left)
	}
}

// testScopeLeftCgroup is an agent that moves a background process out of
// the run's cgroup into the cgroup root (which its uid may write where it
// is root, as the local provider's agent is on a CI machine) before it
// exits: the end of the run must still find it by its marker.
func (s *suite) testScopeLeftCgroup(t *testing.T) {
	ctx, h := s.sandbox(t)
	m := mark()
	t.Cleanup(func() { killMarked(h, m) })
	agent := fmt.Sprintf(`root=
while read -r a mp fs b; do [ "$fs" = cgroup2 ] && { root=$mp; break; }; done </proc/self/mounts
sh -c 'echo $$ >"$1/cgroup.procs" 2>/dev/null && echo moved; exec sleep %[1]d' corral-escape "$root" </dev/null &
sleep 1
grep '^0::' /proc/self/cgroup || echo 'no cgroup v2'
exit 0
`, m)
	p, nonce := s.startSpec(t, ctx, h, journal.Spec{Agent: sandbox.Command{Shell: agent}})
	lines, _, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	for _, l := range lines {
		moved = moved || string(l.Data) == "moved"
	}
	left := leftovers(t, ctx, h, m)
	t.Logf("a process that left the run's cgroup (moved: %v, cgroup: %v): %d of 1 left after the run", moved, contained(lines, p), left)
	if left != 0 {
		t.Errorf("%d processes outlived the run after leaving its cgroup", left)
	}
}

func (s *suite) testScopeKeep(t *testing.T) {
	ctx, h := s.sandbox(t)
	m := mark()
	t.Cleanup(func() { killMarked(h, m) })
	p, nonce := s.startSpec(t, ctx, h, journal.Spec{Agent: sandbox.Command{Shell: fmt.Sprintf("(sleep %d &)\nexit 0", m)}, KeepBackground: true})
	if _, _, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, ctx, h, m); left != 1 {
		t.Errorf("KeepBackground: %d marked processes after the run, want the 1 it left", left)
	}
}

// testScopeOthers runs two agents side by side whose run ids make one
// token a prefix of the other, and a third with the very same run id in
// another journal directory: when the first ends (leaving a background
// process) and when it is cancelled, the others' agents live on.
func (s *suite) testScopeOthers(t *testing.T) {
	ctx, h := s.sandbox(t)
	base := runID("scope-same")
	m := mark()
	t.Cleanup(func() { killMarked(h, m) })
	startAt := func(dir, id, script string) (journal.Paths, string) {
		t.Helper()
		p, err := journal.PathsFor(dir, id)
		if err != nil {
			t.Fatal(err)
		}
		nonce := journal.NewNonce()
		if err := launch(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: sandbox.Command{Shell: script}}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeJournal(h, p) })
		return p, nonce
	}
	long := fmt.Sprintf("exec sleep %d", m)
	pLong, _ := startAt("", base+"0", long)                  // token base+"0": base is its prefix
	pTwin, _ := startAt("/tmp/corral-runs-twin", base, long) // the same run id, another directory
	t.Cleanup(func() {
		kctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = journal.Kill(kctx, h, pLong, time.Second)
		_ = journal.Kill(kctx, h, pTwin, time.Second)
	})
	p, nonce := startAt("", base, fmt.Sprintf("(sleep %d &)\nexit 0", m+1))
	if _, _, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0); err != nil {
		t.Fatal(err)
	}
	if n := leftovers(t, ctx, h, m); n != 2 {
		t.Errorf("after another run ended, %d of the 2 other runs' agents live", n)
	}
	p2, nonce2 := startAt("", base+"x", fmt.Sprintf("echo ready; exec sleep %d", m+1))
	rctx, stop := context.WithCancel(ctx)
	_, _ = reader(h, p2, nonce2, journal.Poll).Read(rctx, 0, func(l journal.Line) error {
		if string(l.Data) == "ready" {
			stop()
		}
		return nil
	})
	stop()
	if err := journal.Kill(ctx, h, p2, time.Second); err != nil {
		t.Fatal(err)
	}
	if n := leftovers(t, ctx, h, m); n != 2 {
		t.Errorf("after another run was cancelled, %d of the 2 other runs' agents live", n)
	}
	t.Logf("runs sharing a token prefix or a run id: 2 of 2 agents untouched by the others' end and cancel")
}
