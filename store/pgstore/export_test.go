package pgstore

import (
	"context"

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
// release is called; queued says how many writes wait for it meanwhile
// (they go as one batch once it is released).
func (s *Store) HoldWriter(ctx context.Context) (queued func() int, release func(), err error) {
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
	return func() int { return len(s.w.ops) }, func() { close(resume); <-done }, nil
}
