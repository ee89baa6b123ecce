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
