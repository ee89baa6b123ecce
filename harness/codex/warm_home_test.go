package codex

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/internal/turntest"
	"github.com/d10ffeed/corral/sandbox"
)

const standInThread = "0f6c1a2e-1111-4222-8333-944455556666"

// standInAppServer is a `codex app-server` stand-in: it answers every
// request line with a thread result, so the keeper check starts it.
const standInAppServer = `#!/bin/sh
while IFS= read -r l; do
  case $l in *'"id":"'*) id=${l#*\"id\":\"}; id=${id%%\"*}
    printf '{"id":"%s","result":{"thread":{"id":"0f6c1a2e-1111-4222-8333-944455556666"}}}\n' "$id" ;; esac
done
`

// warmHomeWorld is a local sandbox with a stand-in app-server, and a
// stand-in bwrap on PATH when outside is set (else none at all), so the keeper's CODEX_HOME
// is made under HOME (in /var/tmp) rather than in the keeper directory.
type warmHomeWorld struct {
	h       sandbox.Handle
	ctx     context.Context
	base    string // holds HOME and the stand-ins
	env     map[string]string
	exe     string
	journal string // the journal directory (under /tmp)
}

func newWarmHomeWorld(t *testing.T, outside bool) *warmHomeWorld {
	t.Helper()
	h, ctx := newHandle(t)
	base, bin := outsideTmp(t)
	exe := filepath.Join(bin, "codex")
	if err := os.WriteFile(exe, []byte(standInAppServer), 0o755); err != nil {
		t.Fatal(err)
	}
	path := noBwrapPath(t, filepath.Join(base, "nobwrap"))
	if outside {
		path = bin + ":" + os.Getenv("PATH")
	}
	w := &warmHomeWorld{h: h, ctx: ctx, base: base, exe: exe, journal: t.TempDir(),
		env: map[string]string{"HOME": filepath.Join(base, "home"), "PATH": path}}
	t.Cleanup(func() { turntest.KillKeepers(w.journal, WarmDirPrefix) })
	return w
}

// prepare prepares a warm turn of thread and returns the keeper's pid
// and its CODEX_HOME (as its keeper directory records it).
func (w *warmHomeWorld) prepare(t *testing.T, thread string) (pid int, home string) {
	t.Helper()
	req := baseRequest(t)
	req.ThreadID, req.Env, req.Session = thread, w.env, standInThread
	req.RunDir = filepath.Join(w.journal, "run-"+thread+".d")
	req.Options[OptExecutable], req.Options[OptWarm], req.Options[OptSessionsDir] = w.exe, "true", filepath.Join(w.base, "sessions")
	inv, err := Harness{}.Prepare(w.ctx, w.h, req)
	if err != nil {
		t.Fatal(err)
	}
	if a := inv.Command.Args; len(a) < 4 || a[3] != "corral-codex-turn" {
		t.Fatalf("not a warm turn: %q", a)
	}
	dir := warmDir(req)
	b, err := os.ReadFile(filepath.Join(dir, "codex-home"))
	if err != nil {
		t.Fatal(err)
	}
	return testutil.PidFile(filepath.Join(dir, "pid")), strings.TrimSpace(string(b))
}

// noBwrapPath links every program of the host's PATH but bwrap into dir
// and returns dir, a PATH without bubblewrap.
func noBwrapPath(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if e.Name() != "bwrap" {
				_ = os.Symlink(filepath.Join(d, e.Name()), filepath.Join(dir, e.Name()))
			}
		}
	}
	return dir
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// TestWarmCodexHome: every keeper gets a CODEX_HOME of its own (0700,
// config.toml, sessions linked), outside /tmp when bubblewrap is there
// and in the keeper directory when not; the same keeper serving the next
// turn keeps it, a replaced keeper's is removed and the new one's is
// another directory, another thread's is never the one a killed keeper
// left, and destroying the sandbox (its keepers get SIGTERM) removes it.
func TestWarmCodexHome(t *testing.T) {
	for _, c := range []struct {
		name    string
		outside bool
	}{{"OutsideTmp", true}, {"InKeeperDir", false}} {
		t.Run(c.name, func(t *testing.T) {
			w := newWarmHomeWorld(t, c.outside)
			pid, home := w.prepare(t, "thread-a")
			wantUnder := filepath.Join(w.journal, WarmDirPrefix)
			if c.outside {
				wantUnder = filepath.Join(w.env["HOME"], ".corral", "codex", "warm") + "/"
			}
			fi, err := os.Stat(home)
			if err != nil || !strings.HasPrefix(home, wantUnder) || fi.Mode().Perm() != 0o700 {
				t.Fatalf("home %s (want under %s): %v %v", home, wantUnder, fi, err)
			}
			if _, err := os.Stat(filepath.Join(home, "config.toml")); err != nil {
				t.Error(err)
			}
			if _, err := os.Readlink(filepath.Join(home, "sessions")); err != nil {
				t.Error(err)
			}
			if pid2, home2 := w.prepare(t, "thread-a"); pid2 != pid || home2 != home || !isDir(home) {
				t.Errorf("warm again: keeper %d home %s, want %d %s", pid2, home2, pid, home)
			}

			// SIGKILLed: no trap runs; the thread's next start removes the
			// home and makes another.
			if err := testutil.KillGroup(pid); err != nil {
				t.Fatal(err)
			}
			testutil.WaitFor(t, w.ctx, "the killed keeper to be gone", 20*time.Millisecond,
				func(context.Context) (bool, error) { return len(testutil.SessionProcs(pid)) == 0, nil })
			if !isDir(home) {
				t.Fatalf("SIGKILL removed the home %s (no trap can)", home)
			}
			// Another thread meanwhile: never the home the killed keeper left.
			_, other := w.prepare(t, "thread-b")
			if other == home || !isDir(other) {
				t.Errorf("thread b: home %s (thread a's stale one %s)", other, home)
			}
			pid3, home3 := w.prepare(t, "thread-a")
			if pid3 == pid || home3 == home || isDir(home) || !isDir(home3) {
				t.Errorf("replaced: keeper %d (was %d), home %s (was %s, still there %v)", pid3, pid, home3, home, isDir(home))
			}

			// The sandbox destroyed: its keepers get SIGTERM and remove
			// their homes.
			if err := w.h.Destroy(w.ctx); err != nil {
				t.Fatal(err)
			}
			for _, hm := range []string{home3, other} {
				testutil.WaitFor(t, w.ctx, "the keeper's home to be removed at the destroy", 20*time.Millisecond,
					func(context.Context) (bool, error) { return !isDir(hm), nil })
			}
			t.Logf("homes: %s, replaced by %s; thread b %s; all removed", home, home3, other)
		})
	}
}

// TestWarmCodexHomeSweep: a keeper's start outside /tmp removes the homes
// there that no keeper directory names any more (their keeper was
// SIGKILLed and its thread never came back) once they are ten minutes
// old, and keeps the one a keeper directory still names and a fresh one.
func TestWarmCodexHomeSweep(t *testing.T) {
	w := newWarmHomeWorld(t, true)
	_, kept := w.prepare(t, "thread-a")
	warm := filepath.Dir(kept)
	orphan, fresh := filepath.Join(warm, WarmDirPrefix+"0000000000000000.AAAAAAAA"), filepath.Join(warm, WarmDirPrefix+"1111111111111111.BBBBBBBB")
	old := time.Now().Add(-time.Hour)
	for _, d := range []string{orphan, fresh} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "owner"), []byte(filepath.Join(w.journal, "gone")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{orphan, kept} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}
	w.prepare(t, "thread-b")
	if isDir(orphan) || !isDir(fresh) || !isDir(kept) {
		t.Errorf("after the sweep: orphan there %v (want false), fresh %v, named %v (want true)", isDir(orphan), isDir(fresh), isDir(kept))
	}
}

// TestWarmCodexHomeRefusesForeignRecord: a codex-home record naming a
// directory no keeper check made (the agent can write the keeper
// directory) is not removed when the keeper is replaced.
func TestWarmCodexHomeRefusesForeignRecord(t *testing.T) {
	w := newWarmHomeWorld(t, true)
	pid, _ := w.prepare(t, "thread-a")
	victim := filepath.Join(w.base, "precious")
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	req := harness.Request{Run: harness.Run{ThreadID: "thread-a"}, RunDir: filepath.Join(w.journal, "run-thread-a.d")}
	if err := os.WriteFile(filepath.Join(warmDir(req), "codex-home"), []byte(victim+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = testutil.KillGroup(pid)
	testutil.WaitFor(t, w.ctx, "the killed keeper to be gone", 20*time.Millisecond,
		func(context.Context) (bool, error) { return len(testutil.SessionProcs(pid)) == 0, nil })
	if pid2, _ := w.prepare(t, "thread-a"); pid2 == pid {
		t.Fatalf("the keeper was not replaced")
	}
	if !isDir(victim) {
		t.Errorf("the replaced keeper's forged record had %s removed", victim)
	}
}
