package pgstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// ListForgettable implements store.Forgetter.
func (s *Store) ListForgettable(ctx context.Context, finishedBefore time.Time, limit int) ([]store.Run, error) {
	const op = storeutil.OpForgettable
	if err := storeutil.ValidateLimit(op, limit); err != nil {
		return nil, err
	}
	if err := s.check(op, ""); err != nil {
		return nil, err
	}
	var a args
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs
		WHERE retention IS NOT NULL AND forgotten_at IS NULL AND finished_at <= ` + a.add(storeutil.MS(finishedBefore)) +
		` AND status <> 'running' ORDER BY finished_at, id`
	if limit > 0 {
		query += ` LIMIT ` + a.add(limit)
	}
	return s.queryRuns(ctx, op, query, a)
}

// ForgetRun implements store.Forgetter: the check and the erasure are one
// transaction, with the run's row locked.
func (s *Store) ForgetRun(ctx context.Context, runID string, keep func(store.Event) json.RawMessage) error {
	const op = storeutil.OpForget
	return s.inTx(ctx, op, runID, func(tx pgx.Tx) error {
		cur, ok, err := getRun(ctx, tx, runID, true)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.RunNotFound(op, runID)
		}
		todo, err := storeutil.CheckForget(cur)
		if err != nil || !todo {
			return err
		}
		if cur.Retention == store.RetainNone {
			if _, err := tx.Exec(ctx, `DELETE FROM corral_run_events WHERE run_id = $1`, runID); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DELETE FROM corral_runs WHERE id = $1`, runID)
			return err
		}
		rows, err := tx.Query(ctx, `SELECT seq, type, data, time FROM corral_run_events WHERE run_id = $1 ORDER BY seq`, runID)
		if err != nil {
			return err
		}
		evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Event, error) {
			e := store.Event{RunID: runID}
			var data []byte
			var ms int64
			if err := row.Scan(&e.Seq, &e.Type, &data, &ms); err != nil {
				return e, err
			}
			e.Data, e.Time = storeutil.CopyData(data), storeutil.FromMS(ms)
			return e, nil
		})
		if err != nil {
			return err
		}
		var bytes int64
		batch := &pgx.Batch{}
		for _, e := range evs {
			var data []byte
			if d := storeutil.KeptData(keep, e); d != nil {
				data, bytes = []byte(d), bytes+int64(len(d))
			}
			batch.Queue(`UPDATE corral_run_events SET data = $1 WHERE run_id = $2 AND seq = $3`, data, runID, e.Seq)
		}
		now := storeutil.MS(storeutil.Now())
		batch.Queue(`UPDATE corral_runs SET prompt = NULL, error = NULL, log_bytes = $1, forgotten_at = $2, updated_at = $2 WHERE id = $3`,
			bytes, now, runID)
		return tx.SendBatch(ctx, batch).Close()
	})
}

// PruneEvents implements store.Forgetter.
func (s *Store) PruneEvents(ctx context.Context, finishedBefore time.Time, limit int) (int, error) {
	const op = storeutil.OpPruneEvents
	if err := storeutil.ValidateLimit(op, limit); err != nil {
		return 0, err
	}
	n := 0
	err := s.inTx(ctx, op, "", func(tx pgx.Tx) error {
		var a args
		query := `SELECT id FROM corral_runs r WHERE finished_at IS NOT NULL AND finished_at <= ` + a.add(storeutil.MS(finishedBefore)) +
			` AND status <> 'running' AND EXISTS (SELECT 1 FROM corral_run_events e WHERE e.run_id = r.id) ORDER BY finished_at, id`
		if limit > 0 {
			query += ` LIMIT ` + a.add(limit)
		}
		query += ` FOR UPDATE SKIP LOCKED`
		rows, err := tx.Query(ctx, query, a...)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			n = 0
			return nil
		}
		if _, err := tx.Exec(ctx, `DELETE FROM corral_run_events WHERE run_id = ANY($1)`, ids); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE corral_runs SET log_bytes = 0 WHERE id = ANY($1)`, ids); err != nil {
			return err
		}
		n = len(ids)
		return nil
	})
	return n, err
}
