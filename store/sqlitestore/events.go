package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// --- events ------------------------------------------------------------------

// The statements ReadEvents runs in its transaction (Open prepares them).
const (
	logStateSQL        = `SELECT driver_epoch, last_seq, log_closed_at FROM corral_runs WHERE id = ?`
	readEventsSQL      = `SELECT seq, type, data, time FROM corral_run_events WHERE run_id = ? AND seq > ? ORDER BY seq`
	readEventsLimitSQL = readEventsSQL + ` LIMIT ?`
)

// logState reads what the fences need from the run row.
func logState(ctx context.Context, q querier, op, runID string) (epoch, lastSeq int64, closed bool, err error) {
	var closedAt *int64
	err = q.QueryRowContext(ctx, logStateSQL, runID).
		Scan(&epoch, &lastSeq, &closedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, storeutil.RunNotFound(op, runID)
	}
	return epoch, lastSeq, closedAt != nil, err
}

// AppendEvents implements store.EventLog: the fences and the insert are one
// write transaction, so no other writer can move the epoch or the log in
// between.
func (s *Store) AppendEvents(ctx context.Context, runID string, epoch, firstSeq int64, events []store.NewEvent) error {
	const op = storeutil.OpAppend
	if err := storeutil.ValidateEvents(runID, firstSeq, events); err != nil {
		return err
	}
	return s.write(ctx, op, runID, func(ctx context.Context, tx conn) error {
		stored, last, closed, err := logState(ctx, tx, op, runID)
		if err != nil {
			return err
		}
		if err := storeutil.CheckAppend(runID, epoch, stored, closed, last, firstSeq); err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		now := storeutil.Now()
		const batch = 100 // 5 values each, far below SQLite's 32766 variables
		for start := 0; start < len(events); start += batch {
			chunk := events[start:min(start+batch, len(events))]
			args := make([]any, 0, 5*len(chunk))
			rows := make([]string, len(chunk))
			for i, e := range chunk {
				rows[i] = "(?, ?, ?, ?, ?)"
				var data any
				if len(e.Data) > 0 {
					data = []byte(e.Data)
				}
				args = append(args, runID, firstSeq+int64(start+i), e.Type, data,
					storeutil.MS(storeutil.EventTime(e.Time, now)))
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO corral_run_events (run_id, seq, type, data, time) VALUES `+
				strings.Join(rows, ", "), args...); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE corral_runs SET last_seq = ?, log_bytes = log_bytes + ? WHERE id = ?`,
			firstSeq+int64(len(events))-1, storeutil.DataBytes(events), runID)
		return err
	})
}

// ReadEvents implements store.EventLog.
func (s *Store) ReadEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	const op = storeutil.OpRead
	if err := storeutil.ValidateLimit(op, limit); err != nil {
		return nil, err
	}
	if err := s.check(op, runID); err != nil {
		return nil, err
	}
	// One read transaction: the existence check and the rows see one
	// snapshot.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, wrapErr(ctx, op, runID, err)
	}
	defer tx.Rollback()
	rtx := inTx{r: &s.r, tx: tx}
	if _, _, _, err := logState(ctx, rtx, op, runID); err != nil {
		return nil, wrapErr(ctx, op, runID, err)
	}
	query := readEventsSQL
	args := []any{runID, afterSeq}
	if limit > 0 {
		query, args = readEventsLimitSQL, append(args, limit)
	}
	rows, err := rtx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, wrapErr(ctx, op, runID, err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		e := store.Event{RunID: runID}
		var data []byte
		var ms int64
		if err := rows.Scan(&e.Seq, &e.Type, &data, &ms); err != nil {
			return nil, wrapErr(ctx, op, runID, err)
		}
		e.Data = storeutil.CopyData(data)
		e.Time = storeutil.FromMS(ms)
		out = append(out, e)
	}
	return out, wrapErr(ctx, op, runID, rows.Err())
}

// LastSeq implements store.EventLog.
func (s *Store) LastSeq(ctx context.Context, runID string) (int64, error) {
	const op = storeutil.OpLastSeq
	if err := s.check(op, runID); err != nil {
		return 0, err
	}
	_, last, _, err := logState(ctx, &s.r, op, runID)
	return last, wrapErr(ctx, op, runID, err)
}

// LogSize implements store.EventLog.
func (s *Store) LogSize(ctx context.Context, runID string) (int64, error) {
	const op = storeutil.OpLogSize
	if err := s.check(op, runID); err != nil {
		return 0, err
	}
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT log_bytes FROM corral_runs WHERE id = ?`, runID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, storeutil.RunNotFound(op, runID)
	}
	return n, wrapErr(ctx, op, runID, err)
}

// CloseLog implements store.EventLog.
func (s *Store) CloseLog(ctx context.Context, runID string, epoch int64) error {
	const op = storeutil.OpCloseLog
	return s.write(ctx, op, runID, func(ctx context.Context, tx conn) error {
		stored, _, closed, err := logState(ctx, tx, op, runID)
		if err != nil {
			return err
		}
		if done, err := storeutil.CheckClose(runID, epoch, stored, closed); done || err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE corral_runs SET log_closed_at = ? WHERE id = ?`, storeutil.MS(storeutil.Now()), runID)
		return err
	})
}

// LogClosed implements store.EventLog.
func (s *Store) LogClosed(ctx context.Context, runID string) (bool, error) {
	const op = storeutil.OpLogClosed
	if err := s.check(op, runID); err != nil {
		return false, err
	}
	_, _, closed, err := logState(ctx, &s.r, op, runID)
	return closed, wrapErr(ctx, op, runID, err)
}
