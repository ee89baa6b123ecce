package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// The checkpoint writer leases expire by s.now (Options.Now), compared in
// epoch milliseconds inside the write's transaction; every write that
// publishes checks the lease in the same transaction.

const (
	threadRowSQL = `SELECT head, writer_token, writer_fence, writer_expires FROM corral_checkpoint_threads WHERE tenant = ? AND thread_id = ?`
	upsertWriter = `INSERT INTO corral_checkpoint_threads (tenant, thread_id, writer_token, writer_fence, writer_expires) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (tenant, thread_id) DO UPDATE SET writer_token = excluded.writer_token, writer_fence = excluded.writer_fence, writer_expires = excluded.writer_expires`
	setHeadSQL     = `UPDATE corral_checkpoint_threads SET head = ? WHERE tenant = ? AND thread_id = ?`
	getCkSQL       = `SELECT ` + storeutil.CheckpointColumns + ` FROM corral_checkpoints WHERE tenant = ? AND thread_id = ? AND id = ?`
	listCkSQL      = `SELECT ` + storeutil.CheckpointColumns + ` FROM corral_checkpoints WHERE tenant = ? AND thread_id = ? ORDER BY created_at, id`
	insertCkSQL    = `INSERT INTO corral_checkpoints (` + storeutil.CheckpointColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	deleteCkSQL    = `DELETE FROM corral_checkpoints WHERE tenant = ? AND thread_id = ? AND id = ?`
	incRefSQL      = `INSERT INTO corral_blob_refs (digest, refs) VALUES (?, 1) ON CONFLICT (digest) DO UPDATE SET refs = refs + 1`
	decRefSQL      = `UPDATE corral_blob_refs SET refs = refs - 1 WHERE digest = ?`
	dropRefSQL     = `DELETE FROM corral_blob_refs WHERE digest = ? AND refs <= 0`
	threadRunSQL   = `SELECT EXISTS (SELECT 1 FROM corral_runs WHERE thread_id = ? AND tenant = ?)`
	threadHasCkSQL = `SELECT EXISTS (SELECT 1 FROM corral_checkpoints WHERE tenant = ? AND thread_id = ?)`
)

func (s *Store) now() time.Time {
	if s.clock != nil {
		return s.clock()
	}
	return time.Now()
}

// threadRow is a thread's row; found is false when it has none.
type threadRow struct {
	found  bool
	head   string
	writer storeutil.WriterRow
}

func loadThread(ctx context.Context, c conn, tenant, thread string) (threadRow, error) {
	var (
		head, token *string
		fence       int64
		expires     *int64
	)
	err := c.QueryRowContext(ctx, threadRowSQL, tenant, thread).Scan(&head, &token, &fence, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return threadRow{}, nil
	}
	if err != nil {
		return threadRow{}, err
	}
	return threadRow{found: true, head: storeutil.StringFromNull(head), writer: storeutil.ScanWriter(token, fence, expires)}, nil
}

// fence loads the thread's row and checks w against it, in c's transaction.
func (s *Store) fence(ctx context.Context, c conn, op, tenant, thread string, w store.WriterLease) (threadRow, error) {
	if err := storeutil.CheckLeaseThread(op, tenant, thread, w); err != nil {
		return threadRow{}, err
	}
	row, err := loadThread(ctx, c, tenant, thread)
	if err != nil {
		return threadRow{}, err
	}
	return row, storeutil.CheckWriter(op, row.writer, row.found, w, s.now())
}

func getCk(ctx context.Context, q querier, tenant, thread, id string) (store.Checkpoint, bool, error) {
	cp, err := storeutil.ScanCheckpoint(q.QueryRowContext(ctx, getCkSQL, tenant, thread, id).Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Checkpoint{}, false, nil
	}
	return cp, err == nil, err
}

func listCk(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, tenant, thread string) ([]store.Checkpoint, error) {
	rows, err := q.QueryContext(ctx, listCkSQL, tenant, thread)
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

func insertCk(ctx context.Context, c conn, cp store.Checkpoint) error {
	vals, err := storeutil.CheckpointValues(cp)
	if err != nil {
		return err
	}
	if _, err := c.ExecContext(ctx, insertCkSQL, vals...); err != nil {
		return err
	}
	for _, d := range cp.Blobs() {
		if _, err := c.ExecContext(ctx, incRefSQL, d); err != nil {
			return err
		}
	}
	return nil
}

func deleteCk(ctx context.Context, c conn, cp store.Checkpoint) error {
	if _, err := c.ExecContext(ctx, deleteCkSQL, cp.Tenant, cp.ThreadID, cp.ID); err != nil {
		return err
	}
	for _, d := range cp.Blobs() {
		if _, err := c.ExecContext(ctx, decRefSQL, d); err != nil {
			return err
		}
		if _, err := c.ExecContext(ctx, dropRefSQL, d); err != nil {
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
	err := s.write(ctx, op, threadID, func(ctx context.Context, c conn) error {
		row, err := loadThread(ctx, c, tenant, threadID)
		if err != nil {
			return err
		}
		now := s.now()
		if row.writer.Live(now) {
			return storeutil.WriterConflict(op, threadID)
		}
		sweep, err := loadSweep(ctx, c)
		if err != nil {
			return err
		}
		w = store.WriterLease{Tenant: tenant, ThreadID: threadID, Token: storeutil.NewWriterToken(),
			Fence: row.writer.Fence + 1, ExpiresAt: storeutil.LeaseExpiry(now, ttl), SweepGen: sweep.Gen}
		_, err = c.ExecContext(ctx, upsertWriter, tenant, threadID, w.Token, w.Fence, storeutil.MS(w.ExpiresAt))
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
	err := s.write(ctx, op, w.ThreadID, func(ctx context.Context, c conn) error {
		if _, err := s.fence(ctx, c, op, w.Tenant, w.ThreadID, w); err != nil {
			return err
		}
		w.ExpiresAt = storeutil.LeaseExpiry(s.now(), ttl)
		_, err := c.ExecContext(ctx, upsertWriter, w.Tenant, w.ThreadID, w.Token, w.Fence, storeutil.MS(w.ExpiresAt))
		return err
	})
	if err != nil {
		return store.WriterLease{}, err
	}
	return w, nil
}

// ReleaseWriter implements store.CheckpointStore.
func (s *Store) ReleaseWriter(ctx context.Context, w store.WriterLease) error {
	return s.write(ctx, storeutil.OpReleaseWriter, w.ThreadID, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, `UPDATE corral_checkpoint_threads SET writer_expires = NULL
WHERE tenant = ? AND thread_id = ? AND writer_token = ? AND writer_fence = ?`, w.Tenant, w.ThreadID, w.Token, w.Fence)
		return err
	})
}

// AppendCheckpoint implements store.CheckpointStore.
func (s *Store) AppendCheckpoint(ctx context.Context, cp store.Checkpoint, expectedHead string, w store.WriterLease) (store.Checkpoint, error) {
	const op = storeutil.OpAppendCheckpoint
	cp, err := storeutil.NormalizeCheckpoint(op, cp, s.now())
	if err != nil {
		return store.Checkpoint{}, err
	}
	err = s.write(ctx, op, cp.ThreadID, func(ctx context.Context, c conn) error {
		row, err := s.fence(ctx, c, op, cp.Tenant, cp.ThreadID, w)
		if err != nil {
			return err
		}
		_, exists, err := getCk(ctx, c, cp.Tenant, cp.ThreadID, cp.ID)
		if err != nil {
			return err
		}
		if err := storeutil.AppendConflicts(cp, expectedHead, exists, row.head); err != nil {
			return err
		}
		sweep, err := loadSweep(ctx, c)
		if err != nil {
			return err
		}
		if err := storeutil.CheckSweep(op, cp.ThreadID, sweep, w, s.now()); err != nil {
			return err
		}
		if err := insertCk(ctx, c, cp); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, setHeadSQL, cp.ID, cp.Tenant, cp.ThreadID)
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
	cp, ok, err := getCk(ctx, s.rdb, tenant, threadID, id)
	switch {
	case err != nil:
		return store.Checkpoint{}, wrapErr(ctx, op, threadID, err)
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
	cps, err := listCk(ctx, s.rdb, tenant, threadID)
	if err != nil {
		return nil, wrapErr(ctx, op, threadID, err)
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
	err := s.rdb.QueryRowContext(ctx, `SELECT head FROM corral_checkpoint_threads WHERE tenant = ? AND thread_id = ?`, tenant, threadID).Scan(&head)
	if errors.Is(err, sql.ErrNoRows) || err == nil && head == nil {
		return "", false, nil
	}
	if err != nil {
		return "", false, wrapErr(ctx, op, threadID, err)
	}
	return *head, true, nil
}

// DeleteHead implements store.CheckpointStore.
func (s *Store) DeleteHead(ctx context.Context, tenant, threadID, id string, w store.WriterLease) error {
	const op = storeutil.OpDeleteHead
	if err := storeutil.ValidateCheckpointID(op, tenant, threadID, id); err != nil {
		return err
	}
	return s.write(ctx, op, threadID, func(ctx context.Context, c conn) error {
		row, err := s.fence(ctx, c, op, tenant, threadID, w)
		if err != nil {
			return err
		}
		if row.head != id {
			return storeutil.NotHead(threadID, id, row.head)
		}
		cp, ok, err := getCk(ctx, c, tenant, threadID, id)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.CheckpointNotFound(op, threadID, id)
		}
		if err := deleteCk(ctx, c, cp); err != nil {
			return err
		}
		var next any
		if cp.Parent != "" {
			if _, ok, err := getCk(ctx, c, tenant, threadID, cp.Parent); err != nil {
				return err
			} else if ok {
				next = cp.Parent
			}
		}
		_, err = c.ExecContext(ctx, setHeadSQL, next, tenant, threadID)
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
	err := s.write(ctx, op, threadID, func(ctx context.Context, c conn) error {
		n = 0
		row, err := s.fence(ctx, c, op, tenant, threadID, w)
		if err != nil {
			return err
		}
		cps, err := listCk(ctx, c, tenant, threadID)
		if err != nil {
			return err
		}
		del := map[string]bool{}
		for _, id := range storeutil.PruneSet(cps, row.head, keep, olderThan) {
			del[id] = true
		}
		for _, cp := range cps {
			if del[cp.ID] {
				if err := deleteCk(ctx, c, cp); err != nil {
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
	err := s.write(ctx, op, dstThreadID, func(ctx context.Context, c conn) error {
		row, err := s.fence(ctx, c, op, tenant, dstThreadID, w)
		if err != nil {
			return err
		}
		src, ok, err := getCk(ctx, c, tenant, srcThreadID, srcID)
		if err != nil {
			return err
		}
		if !ok {
			return storeutil.ForkSourceNotFound(srcThreadID, srcID)
		}
		var hasCk, hasRun bool
		if err := c.QueryRowContext(ctx, threadHasCkSQL, tenant, dstThreadID).Scan(&hasCk); err != nil {
			return err
		}
		if hasCk || row.head != "" {
			return storeutil.ForkDestinationNotEmpty(dstThreadID, "checkpoints")
		}
		if err := c.QueryRowContext(ctx, threadRunSQL, dstThreadID, tenant).Scan(&hasRun); err != nil {
			return err
		}
		if hasRun {
			return storeutil.ForkDestinationNotEmpty(dstThreadID, "runs")
		}
		root = storeutil.ForkRoot(src, dstThreadID, dstID, createdAt, s.now())
		if err := insertCk(ctx, c, root); err != nil {
			return err
		}
		_, err = c.ExecContext(ctx, setHeadSQL, dstID, tenant, dstThreadID)
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT digest, refs FROM corral_blob_refs WHERE refs > 0 ORDER BY digest`)
	if err != nil {
		return nil, wrapErr(ctx, op, "", err)
	}
	defer rows.Close()
	out := []store.BlobRef{}
	for rows.Next() {
		var r store.BlobRef
		if err := rows.Scan(&r.Digest, &r.References); err != nil {
			return nil, wrapErr(ctx, op, "", err)
		}
		out = append(out, r)
	}
	return out, wrapErr(ctx, op, "", rows.Err())
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
	return s.write(ctx, op, digest, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, `INSERT INTO corral_blobs (digest, size, data) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING`,
			digest, int64(len(b)), b)
		return err
	})
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
	err := s.rdb.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM corral_blobs WHERE digest = ?)`, digest).Scan(&ok)
	return ok, wrapErr(ctx, op, digest, err)
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
	err := s.rdb.QueryRowContext(ctx, `SELECT data FROM corral_blobs WHERE digest = ?`, digest).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storeutil.BlobNotFound(op, digest)
	}
	if err != nil {
		return nil, wrapErr(ctx, op, digest, err)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// DeleteBlob implements store.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, digest string) error {
	const op = storeutil.OpDeleteBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return err
	}
	return s.write(ctx, op, digest, func(ctx context.Context, c conn) error {
		_, err := c.ExecContext(ctx, `DELETE FROM corral_blobs WHERE digest = ?`, digest)
		return err
	})
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
	rows, err := s.rdb.QueryContext(ctx, `SELECT digest FROM corral_blobs WHERE digest > ? ORDER BY digest LIMIT ?`, after, limit+1)
	if err != nil {
		return nil, "", wrapErr(ctx, op, "", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, "", wrapErr(ctx, op, "", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", wrapErr(ctx, op, "", err)
	}
	if len(out) <= limit {
		return out, "", nil
	}
	out = out[:limit]
	return out, storeutil.BlobCursor(out[limit-1]), nil
}
