package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// A thread's row in corral_checkpoint_threads is the lock of its
// checkpoints: every write takes it (SELECT ... FOR UPDATE) and checks the
// writer lease in the same transaction that writes. AcquireWriter first
// makes sure the row exists, so two first acquisitions queue on it instead
// of racing to insert. The lease clock is Options.Now, or the database's
// clock (clock_timestamp()) without one.

const (
	ensureThreadSQL = `INSERT INTO corral_checkpoint_threads (tenant, thread_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	lockThreadSQL   = `SELECT head, writer_token, writer_fence, writer_expires FROM corral_checkpoint_threads WHERE tenant = $1 AND thread_id = $2 FOR UPDATE`
	setWriterSQL    = `UPDATE corral_checkpoint_threads SET writer_token = $3, writer_fence = $4, writer_expires = $5 WHERE tenant = $1 AND thread_id = $2`
	setHeadSQL      = `UPDATE corral_checkpoint_threads SET head = $3 WHERE tenant = $1 AND thread_id = $2`
	getCkSQL        = `SELECT ` + storeutil.CheckpointColumns + ` FROM corral_checkpoints WHERE tenant = $1 AND thread_id = $2 AND id = $3`
	listCkSQL       = `SELECT ` + storeutil.CheckpointColumns + ` FROM corral_checkpoints WHERE tenant = $1 AND thread_id = $2 ORDER BY created_at, id`
	insertCkSQL     = `INSERT INTO corral_checkpoints (` + storeutil.CheckpointColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	deleteCkSQL     = `DELETE FROM corral_checkpoints WHERE tenant = $1 AND thread_id = $2 AND id = $3`
	incRefSQL       = `INSERT INTO corral_blob_refs (digest, refs) VALUES ($1, 1) ON CONFLICT (digest) DO UPDATE SET refs = corral_blob_refs.refs + 1`
	decRefSQL       = `UPDATE corral_blob_refs SET refs = refs - 1 WHERE digest = $1`
	dropRefSQL      = `DELETE FROM corral_blob_refs WHERE digest = $1 AND refs <= 0`
	threadRunSQL    = `SELECT EXISTS (SELECT 1 FROM corral_runs WHERE thread_id = $1 AND tenant = $2)`
	threadHasCkSQL  = `SELECT EXISTS (SELECT 1 FROM corral_checkpoints WHERE tenant = $1 AND thread_id = $2)`
)

// threadLockClass is the first key of the advisory locks that serialize a
// thread's run creation with forks into it.
const threadLockClass = 0x636b7274 // "ckrt"

// lockThreadRuns takes, until tx ends, the advisory lock of the thread's
// runs: CreateRun and ForkCheckpoint take it, so a fork's check that its
// destination has no runs cannot miss a run being created (READ COMMITTED
// does not see an uncommitted insert, and there may be no row to lock
// yet). Threads whose keys collide only wait for each other.
func lockThreadRuns(ctx context.Context, tx pgx.Tx, tenant, thread string) error {
	query, a := threadRunsLockSQL(tenant, thread)
	_, err := tx.Exec(ctx, query, a...)
	return err
}

// threadRunsLockSQL is the statement of lockThreadRuns and its arguments.
func threadRunsLockSQL(tenant, thread string) (string, []any) {
	return `SELECT pg_advisory_xact_lock($1, hashtext($2))`, []any{int32(threadLockClass), fmt.Sprintf("%d:%s/%s", len(tenant), tenant, thread)}
}

// leaseNow is the lease clock's time, read inside tx.
func (s *Store) leaseNow(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	if s.clock != nil {
		return s.clock(), nil
	}
	var ms int64
	if err := tx.QueryRow(ctx, `SELECT `+dbNowMS).Scan(&ms); err != nil {
		return time.Time{}, err
	}
	return storeutil.FromMS(ms), nil
}

// recordNow is the time for a checkpoint without a CreatedAt.
func (s *Store) recordNow() time.Time {
	if s.clock != nil {
		return store.Millis(s.clock())
	}
	return storeutil.Now()
}

type threadRow struct {
	found  bool
	head   string
	writer storeutil.WriterRow
}

func lockThread(ctx context.Context, tx pgx.Tx, tenant, thread string) (threadRow, error) {
	var (
		head, token *string
		fence       int64
		expires     *int64
	)
	err := tx.QueryRow(ctx, lockThreadSQL, tenant, thread).Scan(&head, &token, &fence, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return threadRow{}, nil
	}
	if err != nil {
		return threadRow{}, err
	}
	return threadRow{found: true, head: storeutil.StringFromNull(head), writer: storeutil.ScanWriter(token, fence, expires)}, nil
}

// fence locks the thread's row and checks w against it.
func (s *Store) fence(ctx context.Context, tx pgx.Tx, op, tenant, thread string, w store.WriterLease) (threadRow, error) {
	if err := storeutil.CheckLeaseThread(op, tenant, thread, w); err != nil {
		return threadRow{}, err
	}
	row, err := lockThread(ctx, tx, tenant, thread)
	if err != nil {
		return threadRow{}, err
	}
	now, err := s.leaseNow(ctx, tx)
	if err != nil {
		return threadRow{}, err
	}
	return row, storeutil.CheckWriter(op, row.writer, row.found, w, now)
}

func getCk(ctx context.Context, q querier, tenant, thread, id string) (store.Checkpoint, bool, error) {
	cp, err := storeutil.ScanCheckpoint(q.QueryRow(ctx, getCkSQL, tenant, thread, id).Scan)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Checkpoint{}, false, nil
	}
	return cp, err == nil, err
}

type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func listCk(ctx context.Context, q rowsQuerier, tenant, thread string) ([]store.Checkpoint, error) {
	rows, err := q.Query(ctx, listCkSQL, tenant, thread)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []store.Checkpoint{}
	for rows.Next() {
		cp, err := storeutil.ScanCheckpoint(rows.Scan)
		if err != nil {
			return nil, err
		}
		out = append(out, cp)
	}
	return out, rows.Err()
}

func insertCk(ctx context.Context, tx pgx.Tx, cp store.Checkpoint) error {
	vals, err := storeutil.CheckpointValues(cp)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, insertCkSQL, vals...); err != nil {
		return err
	}
	for _, d := range cp.Blobs() {
		if _, err := tx.Exec(ctx, incRefSQL, d); err != nil {
			return err
		}
	}
	return nil
}

func deleteCk(ctx context.Context, tx pgx.Tx, cp store.Checkpoint) error {
	if _, err := tx.Exec(ctx, deleteCkSQL, cp.Tenant, cp.ThreadID, cp.ID); err != nil {
		return err
	}
	for _, d := range cp.Blobs() {
		if _, err := tx.Exec(ctx, decRefSQL, d); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, dropRefSQL, d); err != nil {
			return err
		}
	}
	return nil
}

// AcquireWriter implements store.CheckpointStore.
func (s *Store) AcquireWriter(ctx context.Context, tenant, threadID string, ttl time.Duration) (store.WriterLease, error) {
	const op = storeutil.OpAcquireWriter
	if err := storeutil.ValidateWriterArgs(op, tenant, threadID, ttl); err != nil {
		return store.WriterLease{}, err
	}
	var w store.WriterLease
	err := s.inTx(ctx, op, threadID, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, ensureThreadSQL, tenant, threadID); err != nil {
			return err
		}
		row, err := lockThread(ctx, tx, tenant, threadID)
		if err != nil {
			return err
		}
		now, err := s.leaseNow(ctx, tx)
		if err != nil {
			return err
		}
		if row.writer.Live(now) {
			return storeutil.WriterConflict(op, threadID)
		}
		sweep, err := loadSweep(ctx, tx, "")
		if err != nil {
			return err
		}
		w = store.WriterLease{Tenant: tenant, ThreadID: threadID, Token: storeutil.NewWriterToken(),
			Fence: row.writer.Fence + 1, ExpiresAt: storeutil.LeaseExpiry(now, ttl), SweepGen: sweep.Gen}
		_, err = tx.Exec(ctx, setWriterSQL, tenant, threadID, w.Token, w.Fence, storeutil.MS(w.ExpiresAt))
		return err
	})
	if err != nil {
		return store.WriterLease{}, err
	}
	return w, nil
}

// RenewWriter implements store.CheckpointStore.
func (s *Store) RenewWriter(ctx context.Context, w store.WriterLease, ttl time.Duration) (store.WriterLease, error) {
	const op = storeutil.OpRenewWriter
	if err := storeutil.ValidateWriterArgs(op, w.Tenant, w.ThreadID, ttl); err != nil {
		return store.WriterLease{}, err
	}
	err := s.inTx(ctx, op, w.ThreadID, func(tx pgx.Tx) error {
		if _, err := s.fence(ctx, tx, op, w.Tenant, w.ThreadID, w); err != nil {
			return err
		}
		now, err := s.leaseNow(ctx, tx)
		if err != nil {
			return err
		}
		w.ExpiresAt = storeutil.LeaseExpiry(now, ttl)
		_, err = tx.Exec(ctx, setWriterSQL, w.Tenant, w.ThreadID, w.Token, w.Fence, storeutil.MS(w.ExpiresAt))
		return err
	})
	if err != nil {
		return store.WriterLease{}, err
	}
	return w, nil
}

// ReleaseWriter implements store.CheckpointStore.
func (s *Store) ReleaseWriter(ctx context.Context, w store.WriterLease) error {
	const op = storeutil.OpReleaseWriter
	if err := s.check(op, w.ThreadID); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `UPDATE corral_checkpoint_threads SET writer_expires = NULL
WHERE tenant = $1 AND thread_id = $2 AND writer_token = $3 AND writer_fence = $4`, w.Tenant, w.ThreadID, w.Token, w.Fence)
	return s.wrap(ctx, op, w.ThreadID, err)
}

// AppendCheckpoint implements store.CheckpointStore.
func (s *Store) AppendCheckpoint(ctx context.Context, cp store.Checkpoint, expectedHead string, w store.WriterLease) (store.Checkpoint, error) {
	const op = storeutil.OpAppendCheckpoint
	cp, err := storeutil.NormalizeCheckpoint(op, cp, s.recordNow())
	if err != nil {
		return store.Checkpoint{}, err
	}
	err = s.inTx(ctx, op, cp.ThreadID, func(tx pgx.Tx) error {
		row, err := s.fence(ctx, tx, op, cp.Tenant, cp.ThreadID, w)
		if err != nil {
			return err
		}
		_, exists, err := getCk(ctx, tx, cp.Tenant, cp.ThreadID, cp.ID)
		if err != nil {
			return err
		}
		if err := storeutil.AppendConflicts(cp, expectedHead, exists, row.head); err != nil {
			return err
		}
		// FOR SHARE: a sweep's begin (an UPDATE of the row) waits until this
		// append commits, so the sweep then reads its references; an append
		// after the begin reads the new generation and is refused.
		sweep, err := loadSweep(ctx, tx, " FOR SHARE")
		if err != nil {
			return err
		}
		now, err := s.leaseNow(ctx, tx)
		if err != nil {
			return err
		}
		if err := storeutil.CheckSweep(op, cp.ThreadID, sweep, w, now); err != nil {
			return err
		}
		if err := insertCk(ctx, tx, cp); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, setHeadSQL, cp.Tenant, cp.ThreadID, cp.ID)
		return err
	})
	if err != nil {
		return store.Checkpoint{}, err
	}
	return storeutil.CopyCheckpoint(cp), nil
}

// GetCheckpoint implements store.CheckpointStore.
func (s *Store) GetCheckpoint(ctx context.Context, tenant, threadID, id string) (store.Checkpoint, error) {
	const op = storeutil.OpGetCheckpoint
	if err := storeutil.ValidateCheckpointID(op, tenant, threadID, id); err != nil {
		return store.Checkpoint{}, err
	}
	if err := s.check(op, threadID); err != nil {
		return store.Checkpoint{}, err
	}
	cp, ok, err := getCk(ctx, s.pool, tenant, threadID, id)
	switch {
	case err != nil:
		return store.Checkpoint{}, s.wrap(ctx, op, threadID, err)
	case !ok:
		return store.Checkpoint{}, storeutil.CheckpointNotFound(op, threadID, id)
	}
	return cp, nil
}

// ListCheckpoints implements store.CheckpointStore.
func (s *Store) ListCheckpoints(ctx context.Context, tenant, threadID string) ([]store.Checkpoint, error) {
	const op = storeutil.OpListCheckpoints
	if err := storeutil.ValidateThread(op, tenant, threadID); err != nil {
		return nil, err
	}
	if err := s.check(op, threadID); err != nil {
		return nil, err
	}
	cps, err := listCk(ctx, s.pool, tenant, threadID)
	if err != nil {
		return nil, s.wrap(ctx, op, threadID, err)
	}
	return cps, nil
}

// Head implements store.CheckpointStore.
func (s *Store) Head(ctx context.Context, tenant, threadID string) (string, bool, error) {
	const op = storeutil.OpHead
	if err := storeutil.ValidateThread(op, tenant, threadID); err != nil {
		return "", false, err
	}
	if err := s.check(op, threadID); err != nil {
		return "", false, err
	}
	var head *string
	err := s.pool.QueryRow(ctx, `SELECT head FROM corral_checkpoint_threads WHERE tenant = $1 AND thread_id = $2`, tenant, threadID).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && head == nil {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.wrap(ctx, op, threadID, err)
	}
	return *head, true, nil
}

// DeleteHead implements store.CheckpointStore.
func (s *Store) DeleteHead(ctx context.Context, tenant, threadID, id string, w store.WriterLease) error {
	const op = storeutil.OpDeleteHead
	if err := storeutil.ValidateCheckpointID(op, tenant, threadID, id); err != nil {
		return err
	}
	return s.inTx(ctx, op, threadID, func(tx pgx.Tx) error {
		row, err := s.fence(ctx, tx, op, tenant, threadID, w)
		if err != nil {
			return err
		}
		if row.head != id {
			return storeutil.NotHead(threadID, id, row.head)
		}
		cp, ok, err := getCk(ctx, tx, tenant, threadID, id)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.CheckpointNotFound(op, threadID, id)
		}
		if err := deleteCk(ctx, tx, cp); err != nil {
			return err
		}
		var next any
		if cp.Parent != "" {
			if _, ok, err := getCk(ctx, tx, tenant, threadID, cp.Parent); err != nil {
				return err
			} else if ok {
				next = cp.Parent
			}
		}
		_, err = tx.Exec(ctx, setHeadSQL, tenant, threadID, next)
		return err
	})
}

// PruneCheckpoints implements store.CheckpointStore.
func (s *Store) PruneCheckpoints(ctx context.Context, tenant, threadID string, keep int, olderThan time.Time, w store.WriterLease) (int, error) {
	const op = storeutil.OpPrune
	if err := storeutil.ValidatePrune(tenant, threadID, keep); err != nil {
		return 0, err
	}
	var n int
	err := s.inTx(ctx, op, threadID, func(tx pgx.Tx) error {
		n = 0
		row, err := s.fence(ctx, tx, op, tenant, threadID, w)
		if err != nil {
			return err
		}
		cps, err := listCk(ctx, tx, tenant, threadID)
		if err != nil {
			return err
		}
		del := map[string]bool{}
		for _, id := range storeutil.PruneSet(cps, row.head, keep, olderThan) {
			del[id] = true
		}
		for _, cp := range cps {
			if del[cp.ID] {
				if err := deleteCk(ctx, tx, cp); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ForkCheckpoint implements store.CheckpointStore.
func (s *Store) ForkCheckpoint(ctx context.Context, tenant, srcThreadID, srcID, dstThreadID, dstID string, createdAt time.Time, w store.WriterLease) (store.Checkpoint, error) {
	const op = storeutil.OpFork
	if err := storeutil.ValidateFork(tenant, srcThreadID, srcID, dstThreadID, dstID); err != nil {
		return store.Checkpoint{}, err
	}
	var root store.Checkpoint
	err := s.inTx(ctx, op, dstThreadID, func(tx pgx.Tx) error {
		// Before the emptiness check: a CreateRun on the destination either
		// committed before (and is seen) or waits until the fork is done.
		if err := lockThreadRuns(ctx, tx, tenant, dstThreadID); err != nil {
			return err
		}
		row, err := s.fence(ctx, tx, op, tenant, dstThreadID, w)
		if err != nil {
			return err
		}
		src, ok, err := getCk(ctx, tx, tenant, srcThreadID, srcID)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.ForkSourceNotFound(srcThreadID, srcID)
		}
		var hasCk, hasRun bool
		if err := tx.QueryRow(ctx, threadHasCkSQL, tenant, dstThreadID).Scan(&hasCk); err != nil {
			return err
		}
		if hasCk || row.head != "" {
			return storeutil.ForkDestinationNotEmpty(dstThreadID, "checkpoints")
		}
		if err := tx.QueryRow(ctx, threadRunSQL, dstThreadID, tenant).Scan(&hasRun); err != nil {
			return err
		}
		if hasRun {
			return storeutil.ForkDestinationNotEmpty(dstThreadID, "runs")
		}
		root = storeutil.ForkRoot(src, dstThreadID, dstID, createdAt, s.recordNow())
		if err := insertCk(ctx, tx, root); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, setHeadSQL, tenant, dstThreadID, dstID)
		return err
	})
	if err != nil {
		return store.Checkpoint{}, err
	}
	return storeutil.CopyCheckpoint(root), nil
}

// BlobReferences implements store.CheckpointStore.
func (s *Store) BlobReferences(ctx context.Context) ([]store.BlobRef, error) {
	const op = storeutil.OpBlobReferences
	if err := s.check(op, ""); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT digest, refs FROM corral_blob_refs WHERE refs > 0 ORDER BY digest`)
	if err != nil {
		return nil, s.wrap(ctx, op, "", err)
	}
	defer rows.Close()
	out := []store.BlobRef{}
	for rows.Next() {
		var r store.BlobRef
		var n int64
		if err := rows.Scan(&r.Digest, &n); err != nil {
			return nil, s.wrap(ctx, op, "", err)
		}
		r.References = int(n)
		out = append(out, r)
	}
	return out, s.wrap(ctx, op, "", rows.Err())
}

// --- blobs -------------------------------------------------------------------

// PutBlob implements store.BlobStore: the verified bytes go in the
// corral_blobs table.
func (s *Store) PutBlob(ctx context.Context, digest string, data io.Reader, size int64) error {
	const op = storeutil.OpPutBlob
	if err := s.check(op, digest); err != nil {
		return err
	}
	b, err := storeutil.ReadBlob(ctx, op, digest, data, size)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO corral_blobs (digest, size, data) VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING`,
		digest, int64(len(b)), b)
	return s.wrap(ctx, op, digest, err)
}

// HasBlob implements store.BlobStore.
func (s *Store) HasBlob(ctx context.Context, digest string) (bool, error) {
	const op = storeutil.OpHasBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return false, err
	}
	if err := s.check(op, digest); err != nil {
		return false, err
	}
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM corral_blobs WHERE digest = $1)`, digest).Scan(&ok)
	return ok, s.wrap(ctx, op, digest, err)
}

// OpenBlob implements store.BlobStore.
func (s *Store) OpenBlob(ctx context.Context, digest string) (io.ReadCloser, error) {
	const op = storeutil.OpOpenBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return nil, err
	}
	if err := s.check(op, digest); err != nil {
		return nil, err
	}
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM corral_blobs WHERE digest = $1`, digest).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, storeutil.BlobNotFound(op, digest)
	}
	if err != nil {
		return nil, s.wrap(ctx, op, digest, err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// DeleteBlob implements store.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, digest string) error {
	const op = storeutil.OpDeleteBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return err
	}
	if err := s.check(op, digest); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `DELETE FROM corral_blobs WHERE digest = $1`, digest)
	return s.wrap(ctx, op, digest, err)
}

// ListBlobs implements store.BlobStore.
func (s *Store) ListBlobs(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	const op = storeutil.OpListBlobs
	after, err := storeutil.ParseBlobCursor(op, cursor)
	if err != nil {
		return nil, "", err
	}
	if limit, err = storeutil.BlobLimit(op, limit); err != nil {
		return nil, "", err
	}
	if err := s.check(op, ""); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT digest FROM corral_blobs WHERE digest > $1 ORDER BY digest LIMIT $2`, after, limit+1)
	if err != nil {
		return nil, "", s.wrap(ctx, op, "", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, "", s.wrap(ctx, op, "", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.wrap(ctx, op, "", err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	return out, storeutil.BlobCursor(out[limit-1]), nil
}
