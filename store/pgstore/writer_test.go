package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// TestWriterBatch: writes queued while the group-commit writer is busy go
// as one batch (one round trip, one transaction), and a write that fails in
// it (a duplicate run id) fails alone: the batch runs again write by write,
// and every other write commits.
func TestWriterBatch(t *testing.T) {
	url := testURL(t)
	s := open(t, url, freshSchema(t, url))
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	if err := s.CreateRun(ctx, store.Run{ID: "run-taken", ThreadID: "thread-taken"}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	for _, tc := range []struct {
		name string
		dup  int // the index of the write that reuses run-taken, or -1
	}{
		{"clean", -1},
		{"one fails", n / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waitQueued, release, err := s.HoldWriter(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before := s.WriteStats()
			ids := make([]string, n)
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				ids[i] = fmt.Sprintf("run-batch-%d-%d", tc.dup+1, i)
				if i == tc.dup {
					ids[i] = "run-taken"
				}
				wg.Go(func() {
					errs[i] = s.CreateRun(ctx, store.Run{ID: ids[i], ThreadID: fmt.Sprintf("thread-%d", i)})
				})
			}
			if err := waitQueued(n); err != nil {
				t.Fatal(err)
			}
			release()
			wg.Wait()
			got := s.WriteStats()
			for i, err := range errs {
				if i == tc.dup {
					if sandbox.CodeOf(err) != sandbox.AlreadyExists {
						t.Errorf("write %d (a duplicate id): %v, want AlreadyExists", i, err)
					}
					continue
				}
				if err != nil {
					t.Errorf("write %d: %v", i, err)
				}
				if _, ok, err := s.GetRun(ctx, ids[i]); err != nil || !ok {
					t.Errorf("run %s after the batch: found %v, %v", ids[i], ok, err)
				}
			}
			batches, writes, alone := got.Batches-before.Batches, got.Writes-before.Writes, got.Alone-before.Alone
			wantBatches, wantWrites, wantAlone := int64(1), int64(n), int64(0)
			if tc.dup >= 0 {
				wantBatches, wantWrites, wantAlone = 1+n, 2*n, n
			}
			if batches != wantBatches || writes != wantWrites || alone != wantAlone {
				t.Errorf("writer: %d batches, %d writes, %d alone; want %d, %d, %d", batches, writes, alone, wantBatches, wantWrites, wantAlone)
			}
		})
	}
}

// TestWriterNotHeldByALock: a write that waits on a row lock held by
// another transaction does not hold up the writes queued behind it: they
// commit while it still waits (its batch gives up on the lock, and it waits
// alone), and it commits once the lock is gone.
func TestWriterNotHeldByALock(t *testing.T) {
	ctx := t.Context()
	url := testURL(t)
	schema := freshSchema(t, url)
	s := open(t, url, schema)
	t.Cleanup(func() { _ = s.Close() })
	if err := s.CreateRun(ctx, store.Run{ID: "run-locked", ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close(context.Background()) })
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema, "corral_runs"}.Sanitize()+` WHERE id = 'run-locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	waitQueued, release, err := s.HoldWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	blocked := make(chan error, 1)
	go func() {
		_, err := s.UpdateRun(ctx, "run-locked", store.RunPatch{Error: store.Set("x")})
		blocked <- err
	}()
	if err := waitQueued(1); err != nil {
		t.Fatal(err)
	}
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.CreateRun(ctx, store.Run{ID: fmt.Sprintf("run-free-%d", i), ThreadID: "t"}) })
	}
	if err := waitQueued(1 + n); err != nil {
		t.Fatal(err)
	}
	release() // one batch: the locked update and the four creates
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d behind a locked write: %v", i, err)
		}
	}
	select {
	case err := <-blocked:
		t.Fatalf("the update of the locked run returned while the lock was held: %v", err)
	default:
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-blocked; err != nil {
		t.Fatalf("the update once the lock was gone: %v", err)
	}
	if rec, _, err := s.GetRun(ctx, "run-locked"); err != nil || rec.Error != "x" {
		t.Fatalf("the locked run after its update: %+v, %v", rec, err)
	}
}
