package docker_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// TestCheckpointAcrossProviders: a thread run on Docker is checkpointed;
// its container and its snapshot image are removed; the thread comes back
// on Docker and on the local provider from the checkpoint, with the same
// files (content, mode, link).
func TestCheckpointAcrossProviders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
	defer cancel()
	dp := newProvider(t, docker.Options{})
	lp, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dk := &sandbox.Definition{ID: "dk-" + randomHex(4), Provider: dp, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotAfterRun}}
	lc := &sandbox.Definition{ID: "lc", Provider: lp}
	var mu sync.Mutex
	var outcomes []string
	r, err := run.New(st, []*sandbox.Definition{dk, lc}, []harness.Harness{command.Harness{}}, run.Options{
		OnEnsure: func(_ time.Duration, o string) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Ensure().Destroy(context.Background(), dk, ensure.Request{Thread: "t"})
		_ = r.Close(context.Background())
	})
	runSh := func(def, thread, script string) string {
		t.Helper()
		rec, err := r.Start(ctx, run.StartRequest{Definition: def, Thread: thread, Harness: command.Name, Prompt: script})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
			if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent {
				out = append(out, ev.Delta)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		got, _, _ := st.GetRun(ctx, rec.ID)
		if got.Status != store.RunCompleted {
			t.Fatalf("run %q: %s %s", script, got.Status, got.Error)
		}
		return strings.Join(out, "")
	}
	const check = `cat src/a.txt; ls -l run.sh | cut -c1-10; readlink link; test -d empty && echo empty-dir`
	runSh(dk.ID, "t", `mkdir -p src empty && printf 'from docker\n' > src/a.txt && printf '#!/bin/sh\n' > run.sh && chmod 755 run.sh && ln -s src/a.txt link`)
	want := runSh(dk.ID, "t", check)
	for _, w := range []string{"from docker", "-rwxr-xr-x", "src/a.txt", "empty-dir"} {
		if !strings.Contains(want, w) {
			t.Fatalf("the Docker sandbox shows %q, want %q in it", want, w)
		}
	}
	if _, err := r.Save(ctx, run.SaveCheckpoint{Thread: "t", Label: "on docker"}); err != nil {
		t.Fatal(err)
	}
	// Remove the container and the snapshot image: only the checkpoint is left.
	inst, ok, err := st.GetInstance(ctx, dk.KeyFor("t", "", ""))
	if err != nil || !ok || inst.LatestSnapshotID == "" {
		t.Fatalf("instance %+v ok %v err %v: want a snapshot to remove", inst, ok, err)
	}
	if err := r.Ensure().Destroy(ctx, dk, ensure.Request{Thread: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := dp.DeleteSnapshot(ctx, inst.LatestSnapshotID); err != nil {
		t.Fatal(err)
	}
	if got := runSh(dk.ID, "t", check); got != want {
		t.Fatalf("back on Docker:\n%s\nwant:\n%s", got, want)
	}
	if got := runSh(lc.ID, "t", check); got != want {
		t.Fatalf("back on local:\n%s\nwant:\n%s", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := len(outcomes); n < 2 || outcomes[n-1] != string(ensure.FromCheckpoint) || outcomes[n-2] != string(ensure.FromCheckpoint) {
		t.Fatalf("ensure outcomes %v: want the last two from the checkpoint", outcomes)
	}
}
