package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// ThreadLockClass is the advisory lock class of lockThreadRuns, for tests
// that look for a waiter in pg_locks.
const ThreadLockClass = threadLockClass

// CreateRunHeld is CreateRun whose transaction stays open: ran is closed
// once the insert ran (its locks held), and it commits when release is
// closed.
func (s *Store) CreateRunHeld(ctx context.Context, r store.Run, ran chan<- struct{}, release <-chan struct{}) error {
	r, err := storeutil.NormalizeRun(r, storeutil.Now())
	if err != nil {
		return err
	}
	return s.inTx(ctx, storeutil.OpCreateRun, r.ID, func(tx pgx.Tx) error {
		if err := createRun(ctx, tx, r); err != nil {
			return err
		}
		close(ran)
		<-release
		return nil
	})
}

// HoldWriter stops the group-commit writer inside a write of its own until
// release is called; waitQueued returns once n writes wait for it (they go
// as one batch once it is released), or ctx ended. It polls the queue's
// length: a write is in the queue, or its goroutine has not reached it,
// so no verdict depends on how long that takes.
func (s *Store) HoldWriter(ctx context.Context) (waitQueued func(n int) error, release func(), err error) {
	holding, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.write(ctx, func(b *pgx.Batch) {
			close(holding)
			<-resume
			b.Queue("SELECT 1")
		}, func(br pgx.BatchResults) error {
			_, err := br.Exec()
			return err
		})
	}()
	select {
	case <-holding:
	case err := <-done:
		return nil, nil, err
	}
	waitQueued = func(n int) error {
		for len(s.w.ops) < n {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	}
	return waitQueued, func() { close(resume); <-done }, nil
}
