package sprites_test

import (
	"context"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/sprites"
	"github.com/d10ffeed/corral/sandbox"
)

// TestCheckpointRestoreInPlace: a checkpoint is taken and restored in the
// same Sprite; RestoreCheckpoint returns only once reads work (the fake
// fails the first reads after a restore, as the reference saw), by
// polling a sentinel with backoff — the pauses are recorded, never slept.
func TestCheckpointRestoreInPlace(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, sl := newProvider(t, s, sprites.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if err := h.FS().WriteFile(ctx, "state.txt", []byte("checkpointed")); err != nil {
		t.Fatal(err)
	}
	c := h.(sprites.Checkpointer)
	cp, err := c.Checkpoint(ctx, "conformance")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.FS().WriteFile(ctx, "state.txt", []byte("changed")); err != nil {
		t.Fatal(err)
	}
	readsBefore := s.Count("fsRead")
	if err := c.RestoreCheckpoint(ctx, cp.ID); err != nil {
		t.Fatal(err)
	}
	reads := s.Count("fsRead") - readsBefore
	got, err := h.FS().ReadFile(ctx, "state.txt")
	if err != nil || string(got) != "checkpointed" {
		t.Fatalf("after the restore: %q, %v", got, err)
	}
	list, _ := c.Checkpoints(ctx)
	t.Logf("checkpoint %s (%d listed); restore waited through %d fs/read calls (2 refused by the fake), pauses recorded %v", cp.ID, len(list), reads, sl.All())
	if reads < 4 {
		t.Fatalf("the restore returned after %d reads: it did not wait for reads to work", reads)
	}
	if _, err := h.Snapshot(ctx, "x"); sandbox.CodeOf(err) != sandbox.Unimplemented {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := c.RestoreCheckpoint(ctx, "v99"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("restore of a missing checkpoint: %v", err)
	}
}
