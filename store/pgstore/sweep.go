package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// loadSweep reads the blob sweep row in tx; lock is "", " FOR SHARE" or
// " FOR UPDATE".
func loadSweep(ctx context.Context, tx pgx.Tx, lock string) (storeutil.SweepRow, error) {
	var (
		gen     int64
		expires *int64
	)
	if err := tx.QueryRow(ctx, `SELECT gen, expires FROM corral_blob_sweep WHERE id = 1`+lock).Scan(&gen, &expires); err != nil {
		return storeutil.SweepRow{}, err
	}
	return storeutil.SweepRow{Gen: gen, Expires: storeutil.TimeFromNull(expires)}, nil
}

func saveSweep(ctx context.Context, tx pgx.Tx, row storeutil.SweepRow) error {
	_, err := tx.Exec(ctx, `UPDATE corral_blob_sweep SET gen = $1, expires = $2 WHERE id = 1`, row.Gen, storeutil.NullMS(row.Expires))
	return err
}

// BeginBlobSweep implements store.CheckpointStore.
func (s *Store) BeginBlobSweep(ctx context.Context, ttl time.Duration) (store.BlobSweep, error) {
	var sw store.BlobSweep
	err := s.inTx(ctx, storeutil.OpBeginSweep, "", func(tx pgx.Tx) error {
		row, err := loadSweep(ctx, tx, " FOR UPDATE")
		if err != nil {
			return err
		}
		now, err := s.leaseNow(ctx, tx)
		if err != nil {
			return err
		}
		if row, err = storeutil.BeginSweep(row, now, ttl); err != nil {
			return err
		}
		sw = store.BlobSweep{Gen: row.Gen, ExpiresAt: row.Expires}
		return saveSweep(ctx, tx, row)
	})
	if err != nil {
		return store.BlobSweep{}, err
	}
	return sw, nil
}

// EndBlobSweep implements store.CheckpointStore.
func (s *Store) EndBlobSweep(ctx context.Context, sw store.BlobSweep) error {
	return s.inTx(ctx, storeutil.OpEndSweep, "", func(tx pgx.Tx) error {
		row, err := loadSweep(ctx, tx, " FOR UPDATE")
		if err != nil {
			return err
		}
		if row, ok := storeutil.EndSweep(row, sw); ok {
			return saveSweep(ctx, tx, row)
		}
		return nil
	})
}

// ListCheckpointThreads implements store.CheckpointStore.
func (s *Store) ListCheckpointThreads(ctx context.Context) ([]store.ThreadRef, error) {
	const op = storeutil.OpListCkThreads
	if err := s.check(op, ""); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT tenant, thread_id FROM corral_checkpoints ORDER BY tenant, thread_id`)
	if err != nil {
		return nil, s.wrap(ctx, op, "", err)
	}
	defer rows.Close()
	out := []store.ThreadRef{}
	for rows.Next() {
		var r store.ThreadRef
		if err := rows.Scan(&r.Tenant, &r.ThreadID); err != nil {
			return nil, s.wrap(ctx, op, "", err)
		}
		out = append(out, r)
	}
	return out, s.wrap(ctx, op, "", rows.Err())
}
