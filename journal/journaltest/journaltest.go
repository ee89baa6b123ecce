// Package journaltest is the journal conformance suite: it runs the
// journal's writer, readers, probe, kill and sweep against a real provider.
// Any provider that runs corral's durable runs must pass it.
package journaltest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// Harness says how to make sandboxes for the suite.
type Harness struct {
	Provider sandbox.Provider
	// Options, when set, returns the options for each fresh sandbox.
	Options func(t *testing.T) sandbox.CreateOptions
	// FloodBytes is how much the flood test writes as fast as it can.
	// Default 64 MiB. The long-line tests scale with it: a line of 50/64
	// of it (50 MiB at the default) and a NUL line of 20/64, both many
	// times the journal's MaxLine of 1 MiB. A provider whose bytes cross
	// a wire in the tests (an emulated cloud API, a cluster's exec stream,
	// a VM's serial or network link) may set 16 MiB, still far past every
	// buffer on the way.
	FloodBytes int64
}

func (h Harness) floodBytes() int64 {
	if h.FloodBytes > 0 {
		return h.FloodBytes
	}
	return 64 << 20
}

// Run runs the suite as subtests of t, for every strategy the provider can
// use (follow only where processes are killable and run in the
// background). The cases common to all strategies run first, one at a
// time; then the strategies' cases run as parallel subtests (each case in
// sandboxes of its own, alongside each other as the runs of different
// users are), bounded by go test's -parallel. Call Run
// last in its test: the parallel subtests run once the test's function
// returns.
func Run(t *testing.T, h Harness) {
	strategies := []journal.Strategy{journal.Poll}
	caps := h.Provider.Capabilities()
	if journal.StrategyFor(caps) == journal.Follow {
		strategies = append(strategies, journal.Follow, watched)
	} else {
		t.Logf("follow strategy not used: provider %q does not claim backgroundProcesses and killableProcesses", h.Provider.Name())
	}
	s := &suite{h: h}
	if _, hs := s.sandbox(t); hostReads(hs) {
		strategies = append(strategies, journal.Host, hostWatched)
		t.Run("HostAttacks", s.hostAttacks)
	}
	t.Run("HostileRunID", s.testHostileRunID)
	t.Run("Probe", s.testProbe)
	t.Run("KillTree", s.testKill)
	t.Run("Sweep", s.testSweep)
	t.Run("Stdin", s.testStdin)
	t.Run("WorkingTreeDiff", s.testDiff)
	t.Run("Scope", s.scopeCases)
	t.Run("ForgedDiffInGitTree", s.testForgedDiffInGitTree)
	for _, st := range strategies {
		t.Run(string(st), func(t *testing.T) {
			t.Parallel()
			t.Run("LinesAndExit", func(t *testing.T) { t.Parallel(); s.testLinesAndExit(t, st) })
			t.Run("ResumeFromOffset", func(t *testing.T) { t.Parallel(); s.testResume(t, st) })
			t.Run("TrailingNewlines", func(t *testing.T) { t.Parallel(); s.testTrailingNewlines(t, st) })
			t.Run("ExitInsideAgent", func(t *testing.T) { t.Parallel(); s.testExitInside(t, st) })
			t.Run("ForgedSentinel", func(t *testing.T) { t.Parallel(); s.testForged(t, st) })
			t.Run("FirstByteDeadline", func(t *testing.T) { t.Parallel(); s.testStalled(t, st) })
			t.Run("AgentLost", func(t *testing.T) { t.Parallel(); s.testLost(t, st) })
			t.Run("ReaderCancelLeavesAgent", func(t *testing.T) { t.Parallel(); s.testReaderCancel(t, st) })
			t.Run("ForgedWithNonce", func(t *testing.T) { t.Parallel(); s.testForgedWithNonce(t, st) })
			t.Run("NULAtEnd", func(t *testing.T) { t.Parallel(); s.testNULAtEnd(t, st) })
			t.Run("Flood", func(t *testing.T) { t.Parallel(); s.testFlood(t, st) })
			t.Run("LongLine", func(t *testing.T) { t.Parallel(); s.testLongLine(t, st, s.h.floodBytes()*50/64, 'a', 0) })
			t.Run("LongNULLine", func(t *testing.T) { t.Parallel(); s.testLongLine(t, st, s.h.floodBytes()*20/64, 0, 4) })
			t.Run("FollowerShellKilled", func(t *testing.T) { t.Parallel(); s.testFollowerKilled(t, st, "shell") })
			t.Run("FollowerTailKilled", func(t *testing.T) { t.Parallel(); s.testFollowerKilled(t, st, "tail") })
			t.Run("FollowerKilled", func(t *testing.T) { t.Parallel(); s.testFollowerKilled(t, st, "shell and tail") })
		})
	}
}

type suite struct{ h Harness }

func (s *suite) sandbox(t *testing.T) (context.Context, sandbox.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	var opts sandbox.CreateOptions
	if s.h.Options != nil {
		opts = s.h.Options(t)
	}
	h, err := s.h.Provider.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		_ = h.Destroy(dctx)
	})
	return ctx, h
}

var runSeq sync.Mutex
var runN int

func runID(prefix string) string {
	runSeq.Lock()
	defer runSeq.Unlock()
	runN++
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), runN)
}

// start launches a shell agent journaled under a fresh run id.
func start(t *testing.T, ctx context.Context, h sandbox.Handle, script string) (journal.Paths, string) {
	t.Helper()
	p, err := journal.PathsFor("", runID("jt"))
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

// removeJournal deletes a test's journal files (on the local provider they
// are in the host's /tmp).
func removeJournal(h sandbox.Handle, p journal.Paths) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = journal.Remove(ctx, h, p)
}

// watched is the follow strategy as the driver that started the agent
// reads it: with Reader.Exited from journal.StartWatch.
const watched journal.Strategy = "follow+exited"

// hostWatched is the host strategy as the driver reads it (with
// Reader.Exited).
const hostWatched journal.Strategy = "host+exited"

// hostReads reports whether h's files are the host's, so the host
// strategy reads its journals.
func hostReads(h sandbox.Handle) bool {
	_, ok := sandbox.HostPath(h, journal.DefaultDir)
	return ok
}

// exited maps a journal's path to the channel journal.StartWatch returned
// for it.
var exited sync.Map

// launch starts a journaled agent as the driver does (journal.StartWatch)
// and keeps the channel for readers of the watched strategy.
func launch(ctx context.Context, h sandbox.Handle, spec journal.Spec) error {
	ch, err := journal.StartWatch(ctx, h, spec)
	if err == nil {
		exited.Store(spec.Paths.Journal, ch)
	}
	return err
}

func reader(h sandbox.Handle, p journal.Paths, nonce string, st journal.Strategy) *journal.Reader {
	r := &journal.Reader{Handle: h, Paths: p, Nonce: nonce, Strategy: st, PollInterval: 50 * time.Millisecond}
	if st == watched || st == hostWatched {
		r.Strategy = journal.Follow
		if st == hostWatched {
			r.Strategy = journal.Host
		}
		if ch, ok := exited.Load(p.Journal); ok {
			r.Exited = ch.(<-chan struct{})
		}
	}
	return r
}

func collect(t *testing.T, ctx context.Context, r *journal.Reader, from int64) ([]journal.Line, journal.Exit, error) {
	t.Helper()
	var lines []journal.Line
	exit, err := r.Read(ctx, from, func(l journal.Line) error {
		lines = append(lines, l)
		return nil
	})
	return lines, exit, err
}

func texts(lines []journal.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Data)
	}
	return out
}

func (s *suite) testLinesAndExit(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `echo '{"n":1}'; echo to-stderr >&2; printf 'par'; sleep 0.3; printf 'tial\ntwo\n\nthree\n'; printf 'no newline at end'; exit 3`)
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A line written in two pieces arrives once, whole; stderr stays out;
	// an unterminated last line is ended by the wrapper.
	want := []string{`{"n":1}`, "partial", "two", "", "three", "no newline at end"}
	if strings.Join(texts(lines), "|") != strings.Join(want, "|") {
		t.Errorf("lines %q, want %q", texts(lines), want)
	}
	if exit.Code != 3 {
		t.Errorf("exit code %d, want 3", exit.Code)
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].End <= lines[i-1].End {
			t.Errorf("offsets not increasing: %v", lines)
		}
	}
	if exit.End <= lines[len(lines)-1].End {
		t.Errorf("exit end %d not after the last line %d", exit.End, lines[len(lines)-1].End)
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"cat", p.Err}})
	if err != nil || string(res.Stdout) != "to-stderr\n" {
		t.Errorf("stderr sidecar = %q, %v", res.Stdout, err)
	}
}

// testTrailingNewlines: the wrapper writes a newline before its end line
// whatever the agent's last byte; output that ends with a newline gets no
// empty line from it, and an empty last line of the agent's own arrives.
func (s *suite) testTrailingNewlines(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	for _, tt := range []struct {
		script string
		want   []string
	}{
		{`echo one; echo two`, []string{"one", "two"}},
		{`echo one; echo`, []string{"one", ""}},
		{`printf 'one\n\n\n'`, []string{"one", "", ""}},
		{`printf 'one\n\ntwo'`, []string{"one", "", "two"}},
		{`exit 0`, []string{}},
		{`echo`, []string{""}},
	} {
		p, nonce := start(t, ctx, h, tt.script)
		lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
		if err != nil {
			t.Fatalf("%s: %v", tt.script, err)
		}
		if got := texts(lines); !slices.Equal(got, tt.want) || exit.Code != 0 {
			t.Errorf("%s: lines %q exit %d; want %q and 0", tt.script, texts(lines), exit.Code, tt.want)
		}
	}
}

func (s *suite) testResume(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `for i in 1 2 3 4 5; do echo "line $i"; done`)
	all, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	if err != nil || len(all) != 5 || exit.Code != 0 {
		t.Fatalf("first read: %q %+v %v", texts(all), exit, err)
	}
	rest, exit2, err := collect(t, ctx, reader(h, p, nonce, st), all[1].End)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts(rest), "|") != "line 3|line 4|line 5" || exit2 != exit {
		t.Errorf("from offset %d: %q %+v", all[1].End, texts(rest), exit2)
	}
	for i, l := range rest {
		if l.End != all[i+2].End {
			t.Errorf("offset of %q = %d, want %d", l.Data, l.End, all[i+2].End)
		}
	}
}

func (s *suite) testExitInside(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `echo before; exit 7; echo never`)
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	if err != nil || exit.Code != 7 || len(lines) != 1 {
		t.Errorf("lines %q exit %+v err %v; want [before] and exit 7", texts(lines), exit, err)
	}
}

func (s *suite) testForged(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	fake := string(journal.SentinelLine(0, journal.NewNonce()))
	// The agent prints a sentinel with a nonce of its own, and tries to
	// find the real one in its environment and its parent's.
	p, nonce := start(t, ctx, h, `printf '%s' "$1"; printf '{"__exit":0}\n'; printf '{"__exit":"0","__nonce":"x"}\n';
		env | grep -c `+journal.NonceEnv+` || true; (tr '\0' '\n' < /proc/$PPID/environ) 2>/dev/null | grep -c `+journal.NonceEnv+` || true; sleep 0.2; exit 4`)
	_ = fake
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 4 {
		t.Errorf("exit %d, want 4: a forged sentinel must be read as data", exit.Code)
	}
	for _, l := range lines {
		if strings.Contains(string(l.Data), nonce) {
			t.Errorf("the agent saw the nonce: %q", l.Data)
		}
	}
}

func (s *suite) testStalled(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, err := journal.PathsFor("", runID("never-started"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, p) })
	r := reader(h, p, journal.NewNonce(), st)
	r.FirstByteTimeout = 700 * time.Millisecond
	begin := time.Now()
	_, _, err = collect(t, ctx, r, 0)
	if !errors.Is(err, journal.ErrStalled) {
		t.Errorf("got %v, want ErrStalled", err)
	}
	if d := time.Since(begin); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}

func (s *suite) testLost(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `echo started; sleep 60`)
	// Kill the wrapper and its agent hard: no sentinel can be written.
	// Kill the wrapper hard: no sentinel can be written. (Its orphaned
	// agent goes with the sandbox.)
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `
		while ! grep -q started "$1" 2>/dev/null; do sleep 0.05; done
		IFS= read -r l <"$1"; p=${l#*:}; p=${p%%[!0-9]*}
		kill -9 "$p"`, "sh", p.Journal}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("killing the wrapper: %v %+v", err, res)
	}
	lines, _, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	if !errors.Is(err, journal.ErrLost) {
		t.Errorf("got %v (lines %q), want ErrLost", err, texts(lines))
	}
}

func (s *suite) testReaderCancel(t *testing.T, st journal.Strategy) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `echo one; while [ ! -e /tmp/`+"go-$$"+` ] && [ ! -e "$HOME/.never" ]; do sleep 0.05; [ -e gate ] && break; done; echo two`)
	rctx, cancel := context.WithCancel(ctx)
	var first journal.Line
	_, err := reader(h, p, nonce, st).Read(rctx, 0, func(l journal.Line) error {
		first = l
		cancel()
		return nil
	})
	if sandbox.CodeOf(err) != sandbox.Canceled {
		t.Fatalf("a cancelled read: %v", err)
	}
	// The agent keeps going without a reader; a new reader resumes.
	if err := h.FS().WriteFile(ctx, "gate", nil); err != nil {
		t.Fatal(err)
	}
	rest, exit, err := collect(t, ctx, reader(h, p, nonce, st), first.End)
	if err != nil || strings.Join(texts(rest), "|") != "two" || exit.Code != 0 {
		t.Errorf("after the reader left: %q %+v %v", texts(rest), exit, err)
	}
}

func (s *suite) testHostileRunID(t *testing.T) {
	ctx, h := s.sandbox(t)
	canary := "/tmp/corral-canary-" + fmt.Sprint(time.Now().UnixNano())
	id := "rp-a;touch " + canary + ";b c/d$(touch " + canary + ")-`touch " + canary + "`"
	p, err := journal.PathsFor("", id)
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	if err := launch(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: sandbox.Command{Args: []string{"echo", "hostile"}}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, p) })
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil || len(lines) != 1 || exit.Code != 0 {
		t.Fatalf("%q %+v %v", texts(lines), exit, err)
	}
	res, _ := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `test -e "$1" && echo EXISTS; ls "$2"`, "sh", canary, p.Dir}})
	if strings.Contains(string(res.Stdout), "EXISTS") {
		t.Fatal("the run id was executed as shell text")
	}
	if !strings.Contains(string(res.Stdout), p.Token+".ndjson") {
		t.Errorf("journal file %s.ndjson not in %q", p.Token, res.Stdout)
	}
	if back, err := journal.DecodeToken(p.Token); err != nil || back != id {
		t.Errorf("decode = %q, %v", back, err)
	}
}

func (s *suite) testProbe(t *testing.T) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `echo hi; while [ ! -e gate ]; do sleep 0.05; done; exit 5`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := journal.Probe(ctx, h, p, nonce)
		if err != nil {
			t.Fatal(err)
		}
		if st.Started {
			if !st.Alive || st.Finished {
				t.Errorf("running: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := h.FS().WriteFile(ctx, "gate", nil); err != nil {
		t.Fatal(err)
	}
	for {
		st, err := journal.Probe(ctx, h, p, nonce)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finished {
			if st.ExitCode != 5 {
				t.Errorf("finished: %+v", st)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never finished: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	missing, _ := journal.PathsFor("", runID("missing"))
	if st, err := journal.Probe(ctx, h, missing, nonce); err != nil || st.Exists || st.Finished {
		t.Errorf("missing journal: %+v %v", st, err)
	}
}

func (s *suite) testKill(t *testing.T) {
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `( while [ ! -e hb.stop ]; do echo . >> hb; sleep 0.05; done ) & echo started; wait`)
	t.Cleanup(func() { _ = h.FS().WriteFile(context.Background(), "hb.stop", nil) })
	size := func() int64 {
		fi, err := h.FS().Stat(ctx, "hb")
		if err != nil {
			return 0
		}
		return fi.Size
	}
	deadline := time.Now().Add(30 * time.Second)
	for size() < 4 {
		if time.Now().After(deadline) {
			t.Fatal("no heartbeat")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := journal.Kill(ctx, h, p, time.Second); err != nil {
		t.Fatal(err)
	}
	a := size()
	time.Sleep(500 * time.Millisecond)
	if b := size(); a != b {
		t.Errorf("the heartbeat went on after Kill: %d -> %d", a, b)
	}
	_, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil {
		t.Fatalf("after Kill the wrapper must still record the exit: %v", err)
	}
	if exit.Code != 143 && exit.Code != 137 {
		t.Errorf("exit %d, want 143 (SIGTERM) or 137", exit.Code)
	}
	if err := journal.Kill(ctx, h, p, time.Second); err != nil {
		t.Errorf("killing a finished run: %v", err)
	}
}

func (s *suite) testSweep(t *testing.T) {
	ctx, h := s.sandbox(t)
	dir := "/tmp/corral-sweep-" + fmt.Sprint(time.Now().UnixNano())
	t.Cleanup(func() { _, _ = h.Exec(context.Background(), sandbox.Command{Args: []string{"rm", "-rf", dir}}) })
	var ids []string
	for i := range 3 {
		id := runID(fmt.Sprintf("sweep%d", i))
		ids = append(ids, id)
		p, _ := journal.PathsFor(dir, id)
		nonce := journal.NewNonce()
		if err := launch(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: sandbox.Command{Shell: "echo x; echo e >&2"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"touch", dir + "/stray_1.ndjson", dir + "/notes.txt"}}); err != nil {
		t.Fatal(err)
	}
	res, err := journal.Sweep(ctx, h, dir, 10, func(_ context.Context, id string) (bool, error) {
		switch id {
		case ids[0]:
			return true, nil
		case ids[1]:
			return false, nil
		}
		return false, errors.New("store down")
	})
	if err != nil {
		t.Fatal(err)
	}
	// Per run: the journal, its stderr and, in a sandbox with its own
	// process table, the wrapper's list of init's children (.pre).
	listed := 8
	if h.Capabilities().OwnProcessTable {
		listed = 11
	}
	if len(res.Deleted) != 1 || res.Deleted[0] != ids[0] || len(res.Kept) != 2 || len(res.Skipped) != 2 || res.Listed != listed {
		t.Errorf("sweep = %+v", res)
	}
	out, _ := h.Exec(ctx, sandbox.Command{Args: []string{"ls", dir}})
	p0, _ := journal.PathsFor(dir, ids[0])
	p1, _ := journal.PathsFor(dir, ids[1])
	if strings.Contains(string(out.Stdout), p0.Token) || !strings.Contains(string(out.Stdout), p1.Token+".err") {
		t.Errorf("after sweep: %q", out.Stdout)
	}
	empty, err := journal.Sweep(ctx, h, dir+"-missing", 10, func(context.Context, string) (bool, error) { return true, nil })
	if err != nil || empty.Listed != 0 {
		t.Errorf("missing dir: %+v %v", empty, err)
	}
}

// noStdin hides a writable stdin, to exercise delivery through a file.
type noStdin struct{ sandbox.Handle }

func (n noStdin) Capabilities() sandbox.Capabilities {
	c := n.Handle.Capabilities()
	c.WritableStdin = false
	return c
}

func (s *suite) testStdin(t *testing.T) {
	ctx, h := s.sandbox(t)
	for name, hh := range map[string]sandbox.Handle{"as-provided": h, "through-a-file": noStdin{h}} {
		t.Run(name, func(t *testing.T) {
			p, err := journal.PathsFor("", runID("stdin"))
			if err != nil {
				t.Fatal(err)
			}
			nonce := journal.NewNonce()
			prompt := "line one\nline 'two' $HOME\n"
			if err := launch(ctx, hh, journal.Spec{Paths: p, Nonce: nonce, Agent: sandbox.Command{Args: []string{"cat"}}, Stdin: []byte(prompt)}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeJournal(h, p) })
			lines, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
			if err != nil || exit.Code != 0 {
				t.Fatalf("%+v %v", exit, err)
			}
			if got := strings.Join(texts(lines), "\n") + "\n"; got != prompt {
				t.Errorf("the agent read %q, want %q", got, prompt)
			}
		})
	}
}

func (s *suite) testDiff(t *testing.T) {
	ctx, h := s.sandbox(t)
	res, err := h.Exec(ctx, sandbox.Command{Shell: `command -v git >/dev/null && git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init && printf 'old\n' > tracked.txt && git add tracked.txt && git -c user.email=a@b -c user.name=a commit -q -m tracked && echo ready`})
	if err != nil {
		t.Fatal(err)
	}
	hasGit := strings.Contains(string(res.Stdout), "ready")
	p, err := journal.PathsFor("", runID("diff"))
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	agent := `printf 'new\n' > tracked.txt; printf 'brand new\n' > untracked.txt; echo done`
	if err := launch(ctx, h, journal.Spec{Paths: p, Nonce: nonce, Agent: sandbox.Command{Shell: agent}, Diff: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, p) })
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, journal.Poll), 0)
	if err != nil || exit.Code != 0 {
		t.Fatalf("%+v %v", exit, err)
	}
	var diff *journal.Diff
	for _, l := range lines {
		if l.Diff != nil {
			diff = l.Diff
		}
	}
	if !hasGit {
		if diff != nil {
			t.Errorf("no git in the sandbox, yet a diff: %q", diff.Patch)
		}
		t.Log("the sandbox has no git: checked that no diff is recorded")
		return
	}
	if diff == nil {
		t.Fatalf("no diff line in %q", texts(lines))
	}
	patch := string(diff.Patch)
	for _, want := range []string{"a/tracked.txt", "-old", "+new", "b/untracked.txt", "+brand new"} {
		if !strings.Contains(patch, want) {
			t.Errorf("the diff lacks %q:\n%s", want, patch)
		}
	}
	st, _ := h.Exec(ctx, sandbox.Command{Args: []string{"git", "status", "--porcelain"}})
	if !strings.Contains(string(st.Stdout), "?? untracked.txt") {
		t.Errorf("the user's index must be untouched; git status: %q", st.Stdout)
	}

	// With a gate (Spec.DiffGate), the baseline is taken beside the
	// agent, which changes files only once the gate is gone (as Claude
	// Code's tools wait on it): the diff is the same as without one, and
	// no gate is left behind.
	gp, err := journal.PathsFor("", runID("gated"))
	if err != nil {
		t.Fatal(err)
	}
	gate := gp.Dir + "/" + gp.Token + ".gate"
	gated := `g=` + sandbox.ShellQuote(gate) + `; while [ -e "$g" ]; do sleep 0.01; done; printf 'gated\n' > tracked.txt; printf 'two\n' > second.txt; echo done`
	nonce = journal.NewNonce()
	if err := launch(ctx, h, journal.Spec{Paths: gp, Nonce: nonce, Agent: sandbox.Command{Shell: gated}, Diff: true, DiffGate: gate}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeJournal(h, gp) })
	lines, exit, err = collect(t, ctx, reader(h, gp, nonce, journal.Poll), 0)
	if err != nil || exit.Code != 0 {
		t.Fatalf("gated: %+v %v", exit, err)
	}
	diff = nil
	for _, l := range lines {
		if l.Diff != nil {
			diff = l.Diff
		}
	}
	if diff == nil {
		t.Fatalf("gated: no diff line in %q", texts(lines))
	}
	patch = string(diff.Patch)
	for _, want := range []string{"a/tracked.txt", "-new", "+gated", "b/second.txt", "+two"} {
		if !strings.Contains(patch, want) {
			t.Errorf("the gated run's diff lacks %q:\n%s", want, patch)
		}
	}
	if strings.Contains(patch, "untracked.txt") {
		t.Errorf("the gated run's diff has the earlier run's file:\n%s", patch)
	}
	if res, err := h.Exec(ctx, sandbox.Command{Args: []string{"test", "-e", gate}}); err != nil || res.ExitCode == 0 {
		t.Errorf("the gate %s is left after the run (%v)", gate, err)
	}
}
