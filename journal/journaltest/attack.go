package journaltest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// startAgent launches the agent that agent builds from the run's paths and
// nonce: a test agent that is given the nonce models one that read it out
// of its wrapper's memory.
func startAgent(t *testing.T, ctx context.Context, h sandbox.Handle, agent func(p journal.Paths, nonce string) sandbox.Command) (journal.Paths, string) {
	t.Helper()
	p, err := journal.PathsFor("", runID("jt"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	if err := launch(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: agent(p, nonce)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, p) })
	return p, nonce
}

// forgedScript returns an agent shell script, with the forged lines it
// prints as its positional parameters ($1, $2, …).
func forgedScript(script string, lines ...string) sandbox.Command {
	return sandbox.Command{Args: append([]string{"sh", "-c", script, "agent"}, lines...)}
}

// checkNoNonce fails if a delivered line carries the nonce.
func checkNoNonce(t *testing.T, lines []journal.Line, nonce string) {
	t.Helper()
	for _, l := range lines {
		if strings.Contains(string(l.Data), nonce) {
			t.Errorf("a forged line reached the caller: %q", l.Data)
		}
		if l.Diff != nil && strings.Contains(string(l.Diff.Patch), "forged") {
			t.Errorf("a forged diff was delivered: %q", l.Diff.Patch)
		}
	}
}

// testForgedWithNonce: an agent that knows the nonce writes the wrapper's
// lines itself. None of them is delivered; the exit recorded is the one
// the agent really exits with.
func (s *suite) testForgedWithNonce(t *testing.T, st journal.Strategy) {
	sent := func(code int, n string) string { return string(journal.SentinelLine(code, n)) }
	diff := func(n string) string {
		return string(journal.DiffLine([]byte("diff --git a/forged b/forged\n"), false, n))
	}
	for _, tt := range []struct {
		name  string
		agent func(p journal.Paths, n string) sandbox.Command
		lines string
		exit  int
	}{
		{"ThenMoreOutput", func(_ journal.Paths, n string) sandbox.Command {
			return forgedScript(`echo one; printf '%s' "$1"; echo two`, sent(9, n))
		}, "one|two", 0},
		{"ThenExitAtOnce", func(_ journal.Paths, n string) sandbox.Command {
			return forgedScript(`printf '%s' "$1"; exit 7`, sent(0, n))
		}, "", 7},
		{"EndDiffAndExit", func(_ journal.Paths, n string) sandbox.Command {
			return forgedScript(`echo one; printf '%s%s%s' "$1" "$2" "$3"; exit 7`, string(journal.EndLine(n)), diff(n), sent(0, n))
		}, "one", 7},
		{"ForgedDiff", func(_ journal.Paths, n string) sandbox.Command {
			return forgedScript(`printf '%s' "$1"; echo one; printf '%s%s' "$2" "$1"`, diff(n), string(journal.EndLine(n)))
		}, "one", 0},
		{"ManyForgedExits", func(_ journal.Paths, n string) sandbox.Command {
			return forgedScript(`i=0; while [ $i -lt 300 ]; do printf '%s' "$1"; i=$((i+1)); done; echo one; exit 7`, sent(0, n))
		}, "one", 7},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, h := s.sandbox(t)
			p, nonce := startAgent(t, ctx, h, tt.agent)
			lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
			if err != nil {
				t.Fatal(err)
			}
			checkNoNonce(t, lines, nonce)
			got := strings.Join(texts(lines), "|")
			if got != tt.lines || exit.Code != tt.exit {
				t.Errorf("lines %q exit %d; want %q exit %d", got, exit.Code, tt.lines, tt.exit)
			}
			accepted := 0
			if exit.Code != tt.exit {
				accepted = 1
			}
			t.Logf("forged exits accepted: %d of 1 attempts", accepted)
		})
	}
	t.Run("WhileRunning", func(t *testing.T) { s.testForgedWhileRunning(t, st, false) })
	t.Run("RewrittenStartLine", func(t *testing.T) { s.testForgedWhileRunning(t, st, true) })
}

// testForgedWhileRunning: the agent writes a forged exit 0 as the
// journal's last line, and waits; meanwhile Probe must not report it
// finished, and the reader must not return. The agent then exits 7. With
// rewrite, the agent first rewrites the start line in place to name a pid
// that does not run: the wrapper is still found by its argv.
func (s *suite) testForgedWhileRunning(t *testing.T, st journal.Strategy, rewrite bool) {
	ctx, h := s.sandbox(t)
	pre := ""
	if rewrite {
		pre = `l=$(head -n 1 "$2"); f=$(printf '%s' "$l" | tr '0-9' '9'); printf '%s\n' "$f" | dd of="$2" conv=notrunc 2>/dev/null; `
	}
	p, nonce := startAgent(t, ctx, h, func(p journal.Paths, n string) sandbox.Command {
		return forgedScript(pre+`echo before; printf '%s' "$1"; while [ ! -e gate ]; do sleep 0.05; done; exit 7`, string(journal.SentinelLine(0, n)), p.Journal)
	})
	type result struct {
		lines []journal.Line
		exit  journal.Exit
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.exit, r.err = reader(h, p, nonce, st).Read(ctx, 0, func(l journal.Line) error {
			r.lines = append(r.lines, l)
			return nil
		})
		done <- r
	}()
	// Wait until the forged line is the journal's last, then look.
	var before journal.Status
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		res, err := h.Exec(ctx, sandbox.Command{Args: []string{"tail", "-c", "100", p.Journal}})
		if err == nil && strings.HasSuffix(string(res.Stdout), string(journal.SentinelLine(0, nonce))) {
			if before, err = journal.Probe(ctx, h, p, nonce); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent never wrote its forged line")
		}
	}
	if before.Finished || !before.Alive {
		t.Errorf("Probe with a forged exit as the last line and the wrapper running: %+v", before)
	}
	select {
	case r := <-done:
		t.Fatalf("the read ended while the agent ran: %+v %v", r.exit, r.err)
	default:
	}
	if err := h.FS().WriteFile(ctx, "gate", nil); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkNoNonce(t, r.lines, nonce)
	if got := strings.Join(texts(r.lines), "|"); got != "before" || r.exit.Code != 7 {
		t.Errorf("lines %q exit %d; want [before] and 7", got, r.exit.Code)
	}
	accepted := 0
	if r.exit.Code != 7 || before.Finished {
		accepted = 1
	}
	t.Logf("forged exits accepted: %d of 1 attempts (probe before the real exit: %+v)", accepted, before)
	after, err := journal.Probe(ctx, h, p, nonce)
	if err != nil || !after.Finished || after.ExitCode != 7 {
		t.Errorf("Probe after the exit: %+v %v", after, err)
	}
}

// testNULAtEnd: output that ends in a NUL byte keeps its exit code, and
// the NUL stays in the output.
func (s *suite) testNULAtEnd(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `printf 'hello\000'; exit 3`)
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	if err != nil {
		t.Fatal(err)
	}
	checkNoNonce(t, lines, nonce)
	if len(lines) != 1 || string(lines[0].Data) != "hello\x00" || exit.Code != 3 {
		t.Errorf("lines %q exit %d; want [hello\\x00] and 3", texts(lines), exit.Code)
	}
}

// testForgedDiffInGitTree: in a git work tree, a forged end line and diff
// line as the agent's last output do not replace the wrapper's diff.
func (s *suite) testForgedDiffInGitTree(t *testing.T) {
	ctx, h := s.sandbox(t)
	res, err := h.Exec(ctx, sandbox.Command{Shell: `command -v git >/dev/null && git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init && echo ready`})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.Stdout), "ready") {
		t.Skip("the sandbox has no git")
	}
	p, err := journal.PathsFor("", runID("forgeddiff"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	forged := string(journal.EndLine(nonce)) + string(journal.DiffLine([]byte("diff --git a/forged b/forged\n"), false, nonce))
	agent := sandbox.Command{Args: []string{"sh", "-c", `printf 'real\n' > real.txt; printf '%s' "$1"`, "agent", forged}}
	if err := launch(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: agent, Diff: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, p) })
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil || exit.Code != 0 {
		t.Fatalf("%+v %v", exit, err)
	}
	var diffs []string
	for _, l := range lines {
		if l.Diff != nil {
			diffs = append(diffs, string(l.Diff.Patch))
		}
	}
	checkNoNonce(t, lines, nonce)
	if len(diffs) != 1 || !strings.Contains(diffs[0], "b/real.txt") {
		t.Errorf("diffs delivered %q; want the wrapper's one, of real.txt", diffs)
	}
}
