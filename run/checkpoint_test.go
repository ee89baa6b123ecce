package run_test

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// makeTree is a workspace with what a checkpoint keeps (nested files, an
// executable, a link inside, an empty directory) and what it leaves out.
const makeTree = `mkdir -p src/deep empty node_modules/pkg &&
printf 'hello\n' > src/a.txt && printf 'deep\n' > src/deep/b.txt &&
printf '#!/bin/sh\necho ran\n' > run.sh && chmod 755 run.sh &&
ln -s src/a.txt link && echo TOKEN=1 > .env && echo junk > node_modules/pkg/x`

// checkTree prints what the thread's workspace holds of makeTree.
const checkTree = `cat src/a.txt src/deep/b.txt; ./run.sh; readlink link; test -d empty && echo empty;
test -e .env || echo no-env; test -e node_modules || echo no-node-modules`

const wantTree = "hello,deep,ran,src/a.txt,empty,no-env,no-node-modules"

type ckptEnv struct {
	r        *run.Runner
	st       store.Store
	def      *sandbox.Definition
	skew     *atomic.Int64
	mu       sync.Mutex
	outcomes []string
}

func newCkptEnv(t *testing.T, lc sandbox.Lifecycle, tweak ...func(*ckptEnv, *run.Options)) *ckptEnv {
	t.Helper()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := &ckptEnv{st: st, skew: new(atomic.Int64)}
	e.def = &sandbox.Definition{ID: "d", Provider: p, Lifecycle: lc}
	opts := run.Options{
		LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond,
		Now: func() time.Time { return time.Now().Add(time.Duration(e.skew.Load())) },
		OnEnsure: func(_ time.Duration, outcome string) {
			e.mu.Lock()
			e.outcomes = append(e.outcomes, outcome)
			e.mu.Unlock()
		},
	}
	for _, f := range tweak {
		f(e, &opts)
	}
	e.r, err = run.New(st, []*sandbox.Definition{e.def}, []harness.Harness{command.Harness{}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.r.Close(context.Background()) })
	return e
}

// runSh runs script in thread and returns its output lines joined by ",".
func (e *ckptEnv) runSh(t *testing.T, thread, script string) string {
	t.Helper()
	c := ctx(t)
	rec, err := e.r.Start(c, run.StartRequest{Definition: "d", Thread: thread, Harness: command.Name, Prompt: script})
	if err != nil {
		t.Fatal(err)
	}
	evs := collect(t, e.r, c, rec.ID, 0, false)
	if err := e.r.Wait(c, rec.ID); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines(evs), ",")
}

func (e *ckptEnv) lastOutcome() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.outcomes[len(e.outcomes)-1]
}

// TestCheckpointBringsThreadBack: a named checkpoint of a thread; its
// sandbox destroyed (record and all); the thread's next run gets a fresh
// sandbox with the checkpoint's files, modes and links, and without what
// checkpoints leave out.
func TestCheckpointBringsThreadBack(t *testing.T) {
	e := newCkptEnv(t, sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone})
	c := ctx(t)
	e.runSh(t, "t", makeTree)
	res, err := e.r.Save(c, run.SaveCheckpoint{Thread: "t", Label: "tree"})
	if err != nil {
		t.Fatal(err)
	}
	cp := res.Checkpoint
	var paths []string
	for _, en := range cp.Entries {
		paths = append(paths, en.Path+":"+string(en.Kind))
	}
	want := []string{"empty:dir", "link:symlink", "run.sh:file", "src/a.txt:file", "src/deep/b.txt:file"}
	if !slices.Equal(paths, want) {
		t.Fatalf("checkpoint entries = %v, want %v", paths, want)
	}
	if cp.Reason != store.CheckpointNamed || cp.Label != "tree" || cp.Parent != "" || cp.Conversation == "" {
		t.Fatalf("checkpoint = reason %q label %q parent %q conversation %q", cp.Reason, cp.Label, cp.Parent, cp.Conversation)
	}
	if err := e.r.Ensure().Destroy(c, e.def, ensure.Request{Thread: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := e.runSh(t, "t", checkTree); got != wantTree {
		t.Fatalf("the thread came back with %q, want %q", got, wantTree)
	}
	if got := e.lastOutcome(); got != string(ensure.FromCheckpoint) {
		t.Fatalf("ensure outcome %q, want %q", got, ensure.FromCheckpoint)
	}
	// A second save chains on the first.
	again, err := e.r.Save(c, run.SaveCheckpoint{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if again.Checkpoint.Parent != cp.ID || again.BlobsPut > 1 {
		t.Fatalf("second checkpoint: parent %q (want %q), %d new blobs (want at most the conversation)", again.Checkpoint.Parent, cp.ID, again.BlobsPut)
	}
	cps, head, err := e.r.Checkpoints(c, "", "t")
	if err != nil || len(cps) != 2 || head != again.Checkpoint.ID {
		t.Fatalf("Checkpoints = %d, head %q, %v", len(cps), head, err)
	}
}

// TestCheckpointForkRestoreRefusals: a fork starts a new thread from a
// checkpoint; restore puts a checkpoint back over a changed workspace; and
// what cannot be saved or restored is refused, naming why.
func TestCheckpointForkRestoreRefusals(t *testing.T) {
	e := newCkptEnv(t, sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone})
	c := ctx(t)
	if _, err := e.r.Save(c, run.SaveCheckpoint{Thread: "none"}); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Save of a thread without runs: %v, want NotFound", err)
	}
	e.runSh(t, "t", makeTree)
	res, err := e.r.Save(c, run.SaveCheckpoint{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := e.r.Fork(c, "", "t", "", "t2")
	if err != nil {
		t.Fatal(err)
	}
	if fork.ThreadID != "t2" || fork.Reason != store.CheckpointForkRoot || fork.SourceCheckpointID != res.Checkpoint.ID {
		t.Fatalf("fork = %+v", fork)
	}
	if _, err := e.r.Fork(c, "", "t", "", "t2"); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Fatalf("a fork into a thread with a checkpoint: %v, want FailedPrecondition", err)
	}
	if got := e.runSh(t, "t2", checkTree); got != wantTree {
		t.Fatalf("the fork's first run found %q, want %q", got, wantTree)
	}
	// Restore over a changed workspace.
	e.runSh(t, "t", "rm -rf src && echo changed > run.sh && echo new > new.txt")
	got, err := e.r.RestoreCheckpoint(c, "", "t", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Removed == 0 || got.Files == 0 {
		t.Fatalf("restore did %+v", got)
	}
	// Restore leaves what checkpoints exclude alone: .env and node_modules
	// are still there.
	if out := e.runSh(t, "t", "cat src/a.txt src/deep/b.txt; ./run.sh; readlink link; test -d empty && echo empty; test -e new.txt || echo no-new; cat .env node_modules/pkg/x"); out != "hello,deep,ran,src/a.txt,empty,no-new,TOKEN=1,junk" {
		t.Fatalf("after restore: %q", out)
	}
	// A corrupted blob: restore refuses before writing anything.
	e.runSh(t, "t", "echo drift > src/a.txt")
	cp := res.Checkpoint
	var blob string
	for _, en := range cp.Entries {
		if en.Path == "src/a.txt" {
			blob = en.Blob
		}
	}
	if err := e.st.DeleteBlob(c, blob); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.RestoreCheckpoint(c, "", "t", cp.ID, nil); err == nil {
		t.Fatal("restore with a missing blob succeeded")
	}
	if out := e.runSh(t, "t", "cat src/a.txt"); out != "drift" {
		t.Fatalf("a failed restore changed the workspace: %q", out)
	}
}

// TestCheckpointAfterRunAndBeforeDestroy: lifecycle checkpoint after-run
// takes one after each run; the reaper takes one before it destroys an
// idle sandbox, and the thread comes back from it.
func TestCheckpointAfterRunAndBeforeDestroy(t *testing.T) {
	e := newCkptEnv(t, sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone, Checkpoint: sandbox.CheckpointAfterRun, KeepAlive: time.Hour})
	c := ctx(t)
	e.runSh(t, "t", makeTree)
	cps, head, err := e.r.Checkpoints(c, "", "t")
	if err != nil || len(cps) != 1 || cps[0].Reason != store.CheckpointAutomatic || cps[0].SourceRunID == "" || head != cps[0].ID {
		t.Fatalf("after a run: %d checkpoints %+v, head %q, %v", len(cps), cps, head, err)
	}
	e.runSh(t, "t", "echo more > more.txt")
	e.skew.Store(int64(2 * time.Hour))
	rep, err := e.r.Reap(c, run.ReapOptions{})
	if err != nil || rep.Idle != 1 || rep.IdleHookFailed != 0 {
		t.Fatalf("reap = %+v, %v: want the idle sandbox destroyed", rep, err)
	}
	cps, _, err = e.r.Checkpoints(c, "", "t")
	if err != nil || len(cps) != 3 || cps[2].Reason != store.CheckpointBeforeDestroy {
		t.Fatalf("after the reap: %d checkpoints, %v", len(cps), err)
	}
	if got := e.runSh(t, "t", checkTree+"; cat more.txt"); got != wantTree+",more" {
		t.Fatalf("the thread came back with %q", got)
	}
	if got := e.lastOutcome(); got != string(ensure.FromCheckpoint) {
		t.Fatalf("ensure outcome %q, want checkpoint", got)
	}
}

// TestCheckpointConversationRedacted: a secret's value in a run's prompt
// (kept as it was given in the run's record) does not reach the
// checkpoint's conversation blob; the rest of the prompt does.
func TestCheckpointConversationRedacted(t *testing.T) {
	const value = "sk-conversation-secret-0123456789"
	secrets, err := sandbox.NewSecrets(map[string]string{"API_TOKEN": value})
	if err != nil {
		t.Fatal(err)
	}
	e := newCkptEnv(t, sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}, func(e *ckptEnv, _ *run.Options) {
		e.def.Workspace = &sandbox.Workspace{Secrets: secrets}
	})
	c := ctx(t)
	if got := e.runSh(t, "t", "echo ran # "+value); got != "ran" {
		t.Fatalf("the run printed %q", got)
	}
	res, err := e.r.Save(c, run.SaveCheckpoint{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := e.st.OpenBlob(c, res.Checkpoint.Conversation)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), value) || !strings.Contains(string(data), "echo ran") {
		t.Fatalf("the conversation holds the secret's value, or lost the prompt: %s", data)
	}
}
