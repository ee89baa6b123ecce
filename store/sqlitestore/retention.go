package sqlitestore

import (
	"context"
	"encoding/json"
	"time"

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
	query := `SELECT ` + storeutil.RunColumns + ` FROM corral_runs
		WHERE retention IS NOT NULL AND forgotten_at IS NULL AND finished_at <= ? AND status <> 'running'
		ORDER BY finished_at, id`
	args := []any{storeutil.MS(finishedBefore)}
	if limit > 0 {
		query, args = query+` LIMIT ?`, append(args, limit)
	}
	return s.queryRuns(ctx, op, query, args...)
}

// ForgetRun implements store.Forgetter: the check and the erasure are one
// write transaction.
func (s *Store) ForgetRun(ctx context.Context, runID string, keep func(store.Event) json.RawMessage) error {
	const op = storeutil.OpForget
	return s.write(ctx, op, runID, func(ctx context.Context, tx conn) error {
		cur, ok, err := getRun(ctx, tx, op, runID)
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
			if _, err := tx.ExecContext(ctx, `DELETE FROM corral_run_events WHERE run_id = ?`, runID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `DELETE FROM corral_runs WHERE id = ?`, runID)
			return err
		}
		rows, err := tx.QueryContext(ctx, readEventsSQL, runID, 0)
		if err != nil {
			return err
		}
		var evs []store.Event
		for rows.Next() {
			e := store.Event{RunID: runID}
			var data []byte
			var ms int64
			if err := rows.Scan(&e.Seq, &e.Type, &data, &ms); err != nil {
				rows.Close()
				return err
			}
			e.Data, e.Time = storeutil.CopyData(data), storeutil.FromMS(ms)
			evs = append(evs, e)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		var bytes int64
		for _, e := range evs {
			var data any
			if d := storeutil.KeptData(keep, e); d != nil {
				data, bytes = []byte(d), bytes+int64(len(d))
			}
			if _, err := tx.ExecContext(ctx, `UPDATE corral_run_events SET data = ? WHERE run_id = ? AND seq = ?`, data, runID, e.Seq); err != nil {
				return err
			}
		}
		now := storeutil.MS(storeutil.Now())
		_, err = tx.ExecContext(ctx, `UPDATE corral_runs SET prompt = NULL, error = NULL, log_bytes = ?, forgotten_at = ?, updated_at = ? WHERE id = ?`,
			bytes, now, now, runID)
		return err
	})
}

// PruneEvents implements store.Forgetter.
func (s *Store) PruneEvents(ctx context.Context, finishedBefore time.Time, limit int) (int, error) {
	const op = storeutil.OpPruneEvents
	if err := storeutil.ValidateLimit(op, limit); err != nil {
		return 0, err
	}
	n := 0
	err := s.write(ctx, op, "", func(ctx context.Context, tx conn) error {
		n = 0
		query := `SELECT id FROM corral_runs r WHERE finished_at IS NOT NULL AND finished_at <= ? AND status <> 'running'
			AND EXISTS (SELECT 1 FROM corral_run_events e WHERE e.run_id = r.id) ORDER BY finished_at, id`
		args := []any{storeutil.MS(finishedBefore)}
		if limit > 0 {
			query, args = query+` LIMIT ?`, append(args, limit)
		}
		rows, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			return err
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := tx.ExecContext(ctx, `DELETE FROM corral_run_events WHERE run_id = ?`, id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE corral_runs SET log_bytes = 0 WHERE id = ?`, id); err != nil {
				return err
			}
		}
		n = len(ids)
		return nil
	})
	return n, err
}
