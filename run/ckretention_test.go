package run_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/storetest"
)

// saveVersions runs n versions of a file in thread and saves a checkpoint
// after each, the clock moving on an hour between them.
func (e *ckptEnv) saveVersions(t *testing.T, thread string, n int) []store.Checkpoint {
	t.Helper()
	var out []store.Checkpoint
	for i := range n {
		e.runSh(t, thread, "echo version-"+string(rune('a'+i))+" > v.txt && echo same > same.txt")
		res, err := e.r.Save(ctx(t), run.SaveCheckpoint{Thread: thread})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Checkpoint)
		e.skew.Add(int64(time.Hour))
	}
	return out
}

// wantBlobsExactlyReferenced reads the blob table and the references: every
// blob a checkpoint names is stored, and nothing else is.
func wantBlobsExactlyReferenced(t *testing.T, st store.Store) {
	t.Helper()
	c := ctx(t)
	refs, err := st.BlobReferences(c)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, r := range refs {
		want = append(want, r.Digest)
	}
	got := storetest.AllBlobs(t, st)
	if !slices.Equal(got, want) {
		t.Fatalf("stored blobs %v, referenced %v", got, want)
	}
}

func ids(cps []store.Checkpoint) []string {
	var out []string
	for _, cp := range cps {
		out = append(out, cp.ID)
	}
	return out
}

// TestCheckpointRetention: the keep and max-age rules (the definition's,
// or the daemon's default) prune a thread's checkpoints in the retention
// pass, never the head, and the sweep then deletes exactly the blobs no
// checkpoint references any more. The max-age rule runs on the runner's
// injected clock.
func TestCheckpointRetention(t *testing.T) {
	cases := []struct {
		name     string
		lc       sandbox.Lifecycle
		opts     run.ForgetOptions
		wantLeft []int // indexes of the 4 saved checkpoints that stay
	}{
		{"definition keep 2", sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone, CheckpointKeep: 2}, run.ForgetOptions{CheckpointKeep: 3}, []int{2, 3}},
		{"daemon keep 3", sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}, run.ForgetOptions{CheckpointKeep: 3}, []int{1, 2, 3}},
		// Saved at now-4h, -3h, -2h, -1h (the clock moved on after each).
		{"definition max age 150m", sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone, CheckpointMaxAge: 150 * time.Minute}, run.ForgetOptions{CheckpointMaxAge: time.Hour}, []int{2, 3}},
		{"daemon max age 30m keeps the head", sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}, run.ForgetOptions{CheckpointMaxAge: 30 * time.Minute}, []int{3}},
		{"no rule", sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}, run.ForgetOptions{}, []int{0, 1, 2, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newCkptEnv(t, tc.lc)
			saved := e.saveVersions(t, "t", 4)
			rep, err := e.r.Forget(ctx(t), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			cps, head, err := e.r.Checkpoints(ctx(t), "", "t")
			if err != nil {
				t.Fatal(err)
			}
			var want []store.Checkpoint
			for _, i := range tc.wantLeft {
				want = append(want, saved[i])
			}
			if !slices.Equal(ids(cps), ids(want)) || head != saved[3].ID {
				t.Fatalf("left %v (head %s), want %v (head %s)", ids(cps), head, ids(want), saved[3].ID)
			}
			if rep.CheckpointsPruned != 4-len(tc.wantLeft) {
				t.Fatalf("report: %d pruned, want %d", rep.CheckpointsPruned, 4-len(tc.wantLeft))
			}
			// Each pruned checkpoint had its own v.txt and conversation.
			if pruned := 4 - len(tc.wantLeft); rep.BlobsSwept != 2*pruned {
				t.Fatalf("report: %d blobs swept, want %d", rep.BlobsSwept, 2*pruned)
			}
			wantBlobsExactlyReferenced(t, e.st)
			// The thread still comes back from what is left.
			if _, err := e.r.RestoreCheckpoint(ctx(t), "", "t", cps[0].ID, nil); err != nil {
				t.Fatalf("restoring the oldest checkpoint left: %v", err)
			}
		})
	}
}

// sweepingBlobs runs hook once, the first time a capture finds that blob
// target is stored, after the check: the retention pass deletes the blob
// between the capture's check and its publish.
type sweepingBlobs struct {
	store.BlobStore
	mu     sync.Mutex
	target string
	hook   func(ctx context.Context)
	fired  bool
}

func (b *sweepingBlobs) HasBlob(ctx context.Context, d string) (bool, error) {
	has, err := b.BlobStore.HasBlob(ctx, d)
	b.mu.Lock()
	fire := has && err == nil && d == b.target && b.hook != nil && !b.fired
	if fire {
		b.fired = true
	}
	b.mu.Unlock()
	if fire {
		b.hook(ctx)
	}
	return has, err
}

// TestBlobSweepDuringCapture: a capture finds a blob stored (another
// thread's old checkpoint's), then the retention pass prunes that
// checkpoint by age
// (the injected clock) and sweeps the blob before the capture publishes.
// The publish is refused (the sweep generation moved), the capture runs
// again and puts the blob back: the new checkpoint is published with every
// blob it names stored, and restores.
func TestBlobSweepDuringCapture(t *testing.T) {
	blobs := &sweepingBlobs{}
	e := newCkptEnv(t, sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}, func(e *ckptEnv, o *run.Options) {
		blobs.BlobStore = e.st
		o.Blobs = blobs
	})
	c := ctx(t)
	e.runSh(t, "a", "echo old > f.txt")
	old, err := e.r.Save(c, run.SaveCheckpoint{Thread: "a"})
	if err != nil {
		t.Fatal(err)
	}
	e.skew.Add(int64(time.Hour))
	e.runSh(t, "a", "echo newer > f.txt")
	if _, err := e.r.Save(c, run.SaveCheckpoint{Thread: "a"}); err != nil {
		t.Fatal(err)
	}
	e.skew.Add(int64(time.Hour))
	// Thread b holds the old content, whose blob only a's old checkpoint
	// names; the pass below prunes that one (a capture holds its own
	// thread's lease, so the prune is of another thread).
	e.runSh(t, "b", "echo old > f.txt")
	blobs.target = old.Checkpoint.Entries[0].Blob
	var rep run.ForgetReport
	blobs.hook = func(ctx context.Context) {
		var err error
		if rep, err = e.r.Forget(ctx, run.ForgetOptions{CheckpointMaxAge: 90 * time.Minute}); err != nil {
			t.Errorf("Forget: %v", err)
		}
		if ok, _ := e.st.HasBlob(ctx, blobs.target); ok {
			t.Errorf("the pass did not sweep the old checkpoint's blob")
		}
	}
	res, err := e.r.Save(c, run.SaveCheckpoint{Thread: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !blobs.fired || rep.CheckpointsPruned != 1 || rep.BlobsSwept < 1 {
		t.Fatalf("hook fired %v, pass %+v: the race did not happen", blobs.fired, rep)
	}
	for _, d := range res.Checkpoint.Blobs() {
		if ok, err := e.st.HasBlob(c, d); err != nil || !ok {
			t.Fatalf("the published checkpoint names blob %s, which is not stored (%v)", d, err)
		}
	}
	wantBlobsExactlyReferenced(t, e.st)
	e.runSh(t, "b", "echo drift > f.txt")
	if _, err := e.r.RestoreCheckpoint(c, "", "b", res.Checkpoint.ID, nil); err != nil {
		t.Fatal(err)
	}
	if out := e.runSh(t, "b", "cat f.txt"); out != "old" {
		t.Fatalf("restored f.txt = %q, want old", out)
	}
}
