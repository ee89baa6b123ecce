package pgstore

// The run and event-log writes, each one round trip on its path that
// succeeds. A fenced write is one statement whose WHERE holds the fences
// (epoch, closed log, next seq, not terminal): the UPDATE takes the run
// row's lock and, under READ COMMITTED, re-checks the WHERE on the row's
// newest version, so a concurrent claim or append cannot slip in between
// the check and the write, exactly as with the SELECT ... FOR UPDATE of a
// transaction, without its BEGIN, SELECT and COMMIT round trips. Only a
// write the fences refused reads the row again, to tell why with the
// same checks (storeutil) as every other store. Every fence is monotonic
// (the epoch and last_seq only grow, a closed log or a terminal run stays
// so), so a refusal the reread cannot explain was a seq gap that another
// writer has filled since: the write is tried again.

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// fencedTries bounds the retries of a refused write whose reread finds
// nothing to refuse (each is a race lost to another writer).
const fencedTries = 8

// insertRunSQL is the INSERT of r and its arguments.
func insertRunSQL(r store.Run) (string, args) {
	var a args
	vals := storeutil.RunValues(r)
	ph := make([]string, len(vals))
	for i, v := range vals {
		ph[i] = a.add(v)
	}
	return `INSERT INTO corral_runs (` + storeutil.RunColumns + `) VALUES (` + strings.Join(ph, ", ") + `)`, a
}

// CreateRun implements store.RunStore: the thread's lock (lockThreadRuns,
// a transaction-scoped advisory lock) and the insert are one write of the
// writer, so they share its batch's transaction: the lock is held until
// the insert commits, in one round trip.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	const op = storeutil.OpCreateRun
	r, err := storeutil.NormalizeRun(r, storeutil.Now())
	if err != nil {
		return err
	}
	if err := s.check(op, r.ID); err != nil {
		return err
	}
	lock, lockArgs := threadRunsLockSQL(r.Tenant, r.ThreadID)
	query, a := insertRunSQL(r)
	err = s.write(ctx, func(b *pgx.Batch) {
		b.Queue(lock, lockArgs...)
		b.Queue(query, a...)
	}, func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return err
		}
		_, err := br.Exec()
		return err
	})
	return s.wrap(ctx, op, r.ID, err) // a duplicate id is AlreadyExists
}

// createRun inserts r in tx under its thread's lock (lockThreadRuns), so a
// fork into the thread that checked it had no runs is not racing it.
func createRun(ctx context.Context, tx pgx.Tx, r store.Run) error {
	if err := lockThreadRuns(ctx, tx, r.Tenant, r.ThreadID); err != nil {
		return err
	}
	query, a := insertRunSQL(r)
	_, err := tx.Exec(ctx, query, a...)
	return err
}

// UpdateRun implements store.RunStore. Each patch field's presence, not its
// value, decides whether its column is in the SET clause; a cleared field
// is written as NULL. IfEpoch and IfNotTerminal are in the WHERE.
func (s *Store) UpdateRun(ctx context.Context, id string, p store.RunPatch) (store.Run, error) {
	const op = storeutil.OpUpdateRun
	assigns, err := storeutil.PatchAssignments(id, p)
	if err != nil {
		return store.Run{}, err
	}
	if err := s.check(op, id); err != nil {
		return store.Run{}, err
	}
	var a args
	sets := []string{"updated_at = " + a.add(storeutil.MS(storeutil.Now()))}
	for _, as := range assigns {
		sets = append(sets, as.Col+" = "+a.add(as.Val))
	}
	where := []string{"id = " + a.add(id)}
	if p.IfEpoch != nil {
		where = append(where, "driver_epoch = "+a.add(*p.IfEpoch))
	}
	if p.IfNotTerminal {
		where = append(where, nonTerminal(&a))
	}
	query := `UPDATE corral_runs SET ` + strings.Join(sets, ", ") + whereClause(where) + ` RETURNING ` + storeutil.RunColumns
	return s.fencedRunWrite(ctx, op, id, query, a, func(cur store.Run) error {
		return storeutil.CheckPatchFences(id, cur.Status, cur.DriverEpoch, p)
	})
}

// ClaimRun implements store.RunStore.
func (s *Store) ClaimRun(ctx context.Context, id string, expectEpoch int64) (store.Run, error) {
	const op = storeutil.OpClaimRun
	if err := s.check(op, id); err != nil {
		return store.Run{}, err
	}
	var a args
	query := `UPDATE corral_runs SET driver_epoch = driver_epoch + 1, updated_at = ` + a.add(storeutil.MS(storeutil.Now())) +
		` WHERE id = ` + a.add(id) + ` AND driver_epoch = ` + a.add(expectEpoch) + ` AND ` + nonTerminal(&a) +
		` RETURNING ` + storeutil.RunColumns
	return s.fencedRunWrite(ctx, op, id, query, a, func(cur store.Run) error {
		return storeutil.CheckClaim(id, cur.Status, cur.DriverEpoch, expectEpoch)
	})
}

// fencedRunWrite runs an UPDATE ... RETURNING of one run whose WHERE holds
// the fences; refused, it rereads the run and returns what check says.
func (s *Store) fencedRunWrite(ctx context.Context, op, id, query string, a args, check func(cur store.Run) error) (store.Run, error) {
	for range fencedTries {
		var out store.Run
		found, err := s.queryRowWrite(ctx, query, a, func(row pgx.Row) error {
			var err error
			out, err = storeutil.ScanRun(row.Scan)
			return err
		})
		if err != nil {
			return store.Run{}, s.wrap(ctx, op, id, err)
		}
		if found {
			return out, nil
		}
		cur, ok, err := getRun(ctx, s.pool, id, false)
		if err != nil {
			return store.Run{}, s.wrap(ctx, op, id, err)
		}
		if !ok {
			return store.Run{}, storeutil.RunNotFound(op, id)
		}
		if err := check(cur); err != nil {
			return store.Run{}, err
		}
	}
	return store.Run{}, sandbox.Errorf(sandbox.Unavailable, op, id, "the write lost %d races to other writers of the run", fencedTries)
}

// appendSQL moves the run row's log state (fenced by epoch, closed marker
// and last seq) and inserts the events in one statement: a refused fence
// updates no row, so no event is inserted.
const appendSQL = `WITH run AS (
  UPDATE corral_runs SET last_seq = $4, log_bytes = log_bytes + $5
  WHERE id = $1 AND driver_epoch = $2 AND log_closed_at IS NULL AND last_seq = $3
  RETURNING id)
INSERT INTO corral_run_events (run_id, seq, type, data, time)
SELECT run.id, e.seq, e.type, e.data, e.time
FROM run, unnest($6::bigint[], $7::text[], $8::bytea[], $9::bigint[]) AS e(seq, type, data, time)`

// AppendEvents implements store.EventLog: one statement checks the fences
// on the locked run row, moves it and inserts the events, so a claim or
// another append cannot slip in between.
func (s *Store) AppendEvents(ctx context.Context, runID string, epoch, firstSeq int64, events []store.NewEvent) error {
	const op = storeutil.OpAppend
	if err := storeutil.ValidateEvents(runID, firstSeq, events); err != nil {
		return err
	}
	if err := s.check(op, runID); err != nil {
		return err
	}
	now := storeutil.Now()
	seqs := make([]int64, len(events))
	types := make([]string, len(events))
	datas := make([][]byte, len(events))
	times := make([]int64, len(events))
	for i, e := range events {
		seqs[i] = firstSeq + int64(i)
		types[i] = e.Type
		if len(e.Data) > 0 {
			datas[i] = e.Data
		}
		times[i] = storeutil.MS(storeutil.EventTime(e.Time, now))
	}
	for range fencedTries {
		if len(events) > 0 {
			tag, err := s.execWrite(ctx, appendSQL, runID, epoch, firstSeq-1, firstSeq+int64(len(events))-1,
				storeutil.DataBytes(events), seqs, types, datas, times)
			if err != nil {
				return s.wrap(ctx, op, runID, err)
			}
			if tag.RowsAffected() == int64(len(events)) {
				return nil
			}
		}
		// Refused, or nothing to write: the fences say why (or that all is well).
		stored, last, closed, err := logState(ctx, s.pool, op, runID, false)
		if err != nil {
			return s.wrap(ctx, op, runID, err)
		}
		if err := storeutil.CheckAppend(runID, epoch, stored, closed, last, firstSeq); err != nil || len(events) == 0 {
			return err
		}
	}
	return sandbox.Errorf(sandbox.Unavailable, op, runID, "the append lost %d races to other writers of the run", fencedTries)
}

// readEventsSQL reads the run row (for NotFound) and its events after $2
// in one statement: a run without such events is one row of NULLs.
const readEventsSQL = `SELECT e.seq, e.type, e.data, e.time FROM corral_runs r
LEFT JOIN LATERAL (SELECT seq, type, data, time FROM corral_run_events
  WHERE run_id = r.id AND seq > $2 ORDER BY seq LIMIT $3) e ON true
WHERE r.id = $1 ORDER BY e.seq`

// ReadEvents implements store.EventLog.
func (s *Store) ReadEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	const op = storeutil.OpRead
	if err := storeutil.ValidateLimit(op, limit); err != nil {
		return nil, err
	}
	if err := s.check(op, runID); err != nil {
		return nil, err
	}
	var lim *int64 // LIMIT NULL is no limit
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := s.pool.Query(ctx, readEventsSQL, runID, afterSeq, lim)
	if err != nil {
		return nil, s.wrap(ctx, op, runID, err)
	}
	found := false
	out := []store.Event{}
	for rows.Next() {
		found = true
		var seq, ms *int64
		var typ *string
		var data []byte
		if err := rows.Scan(&seq, &typ, &data, &ms); err != nil {
			rows.Close()
			return nil, s.wrap(ctx, op, runID, err)
		}
		if seq == nil { // the run's row, with no event after afterSeq
			continue
		}
		out = append(out, store.Event{RunID: runID, Seq: *seq, Type: *typ, Data: storeutil.CopyData(data), Time: storeutil.FromMS(*ms)})
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap(ctx, op, runID, err)
	}
	if !found {
		return nil, storeutil.RunNotFound(op, runID)
	}
	return out, nil
}

// CloseLog implements store.EventLog: one UPDATE fenced by the epoch; a
// log already closed is a no-op.
func (s *Store) CloseLog(ctx context.Context, runID string, epoch int64) error {
	const op = storeutil.OpCloseLog
	if err := s.check(op, runID); err != nil {
		return err
	}
	for range fencedTries {
		tag, err := s.execWrite(ctx, `UPDATE corral_runs SET log_closed_at = $1 WHERE id = $2 AND driver_epoch = $3 AND log_closed_at IS NULL`,
			storeutil.MS(storeutil.Now()), runID, epoch)
		if err != nil {
			return s.wrap(ctx, op, runID, err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		stored, _, closed, err := logState(ctx, s.pool, op, runID, false)
		if err != nil {
			return s.wrap(ctx, op, runID, err)
		}
		if done, err := storeutil.CheckClose(runID, epoch, stored, closed); done || err != nil {
			return err
		}
	}
	return sandbox.Errorf(sandbox.Unavailable, op, runID, "closing the log lost %d races to other writers of the run", fencedTries)
}
