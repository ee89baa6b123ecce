package sqlitestore

import (
	"context"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// loadSweep reads the blob sweep row in c's transaction.
func loadSweep(ctx context.Context, c conn) (storeutil.SweepRow, error) {
	var (
		gen     int64
		expires *int64
	)
	if err := c.QueryRowContext(ctx, `SELECT gen, expires FROM corral_blob_sweep WHERE id = 1`).Scan(&gen, &expires); err != nil {
		return storeutil.SweepRow{}, err
	}
	return storeutil.SweepRow{Gen: gen, Expires: storeutil.TimeFromNull(expires)}, nil
}

func saveSweep(ctx context.Context, c conn, row storeutil.SweepRow) error {
	_, err := c.ExecContext(ctx, `UPDATE corral_blob_sweep SET gen = ?, expires = ? WHERE id = 1`, row.Gen, storeutil.NullMS(row.Expires))
	return err
}

// BeginBlobSweep implements store.CheckpointStore.
func (s *Store) BeginBlobSweep(ctx context.Context, ttl time.Duration) (store.BlobSweep, error) {
	const op = storeutil.OpBeginSweep
	var sw store.BlobSweep
	err := s.write(ctx, op, "", func(ctx context.Context, c conn) error {
		row, err := loadSweep(ctx, c)
		if err != nil {
			return err
		}
		if row, err = storeutil.BeginSweep(row, s.now(), ttl); err != nil {
			return err
		}
		sw = store.BlobSweep{Gen: row.Gen, ExpiresAt: row.Expires}
		return saveSweep(ctx, c, row)
	})
	if err != nil {
		return store.BlobSweep{}, err
	}
	return sw, nil
}

// EndBlobSweep implements store.CheckpointStore.
func (s *Store) EndBlobSweep(ctx context.Context, sw store.BlobSweep) error {
	return s.write(ctx, storeutil.OpEndSweep, "", func(ctx context.Context, c conn) error {
		row, err := loadSweep(ctx, c)
		if err != nil {
			return err
		}
		if row, ok := storeutil.EndSweep(row, sw); ok {
			return saveSweep(ctx, c, row)
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT DISTINCT tenant, thread_id FROM corral_checkpoints ORDER BY tenant, thread_id`)
	if err != nil {
		return nil, wrapErr(ctx, op, "", err)
	}
	defer rows.Close()
	out := []store.ThreadRef{}
	for rows.Next() {
		var r store.ThreadRef
		if err := rows.Scan(&r.Tenant, &r.ThreadID); err != nil {
			return nil, wrapErr(ctx, op, "", err)
		}
		out = append(out, r)
	}
	return out, wrapErr(ctx, op, "", rows.Err())
}
