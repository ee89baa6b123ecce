package memstore

import (
	"bytes"
	"context"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// threadKey names a thread within its tenant.
type threadKey struct{ tenant, thread string }

// ckThread is one thread's checkpoints, head and writer lease.
type ckThread struct {
	cps    map[string]store.Checkpoint
	head   string
	writer storeutil.WriterRow
	hasW   bool
}

// ckState is the checkpoint and blob part of a Store, under its mutex.
type ckState struct {
	threads map[threadKey]*ckThread
	refs    map[string]int
	blobs   map[string][]byte
	sweep   storeutil.SweepRow
}

func newCkState() ckState {
	return ckState{threads: map[threadKey]*ckThread{}, refs: map[string]int{}, blobs: map[string][]byte{}}
}

// thread returns the thread's state, creating it when create is set.
func (c *ckState) thread(tenant, thread string, create bool) *ckThread {
	k := threadKey{tenant, thread}
	t := c.threads[k]
	if t == nil && create {
		t = &ckThread{cps: map[string]store.Checkpoint{}}
		c.threads[k] = t
	}
	return t
}

func (c *ckState) addRefs(cp store.Checkpoint) {
	for _, d := range cp.Blobs() {
		c.refs[d]++
	}
}

func (c *ckState) dropRefs(cp store.Checkpoint) {
	for _, d := range cp.Blobs() {
		if c.refs[d]--; c.refs[d] <= 0 {
			delete(c.refs, d)
		}
	}
}

// fence checks w against the thread's lease; the caller holds the mutex.
func (s *Store) fence(op, tenant, thread string, w store.WriterLease) (*ckThread, error) {
	if err := storeutil.CheckLeaseThread(op, tenant, thread, w); err != nil {
		return nil, err
	}
	t := s.ck.thread(tenant, thread, false)
	if t == nil {
		return nil, storeutil.WriterLost(op, thread)
	}
	if err := storeutil.CheckWriter(op, t.writer, t.hasW, w, s.now()); err != nil {
		return nil, err
	}
	return t, nil
}

// AcquireWriter implements store.CheckpointStore.
func (s *Store) AcquireWriter(ctx context.Context, tenant, threadID string, ttl time.Duration) (store.WriterLease, error) {
	const op = storeutil.OpAcquireWriter
	if err := ctxErr(ctx, op, threadID); err != nil {
		return store.WriterLease{}, err
	}
	if err := storeutil.ValidateWriterArgs(op, tenant, threadID, ttl); err != nil {
		return store.WriterLease{}, err
	}
	if err := s.lock(op, threadID); err != nil {
		return store.WriterLease{}, err
	}
	defer s.mu.Unlock()
	now := s.now()
	t := s.ck.thread(tenant, threadID, true)
	if t.hasW && t.writer.Live(now) {
		return store.WriterLease{}, storeutil.WriterConflict(op, threadID)
	}
	t.writer = storeutil.WriterRow{Token: storeutil.NewWriterToken(), Fence: t.writer.Fence + 1, Expires: storeutil.LeaseExpiry(now, ttl)}
	t.hasW = true
	return store.WriterLease{Tenant: tenant, ThreadID: threadID, Token: t.writer.Token, Fence: t.writer.Fence, ExpiresAt: t.writer.Expires,
		SweepGen: s.ck.sweep.Gen}, nil
}

// RenewWriter implements store.CheckpointStore.
func (s *Store) RenewWriter(ctx context.Context, w store.WriterLease, ttl time.Duration) (store.WriterLease, error) {
	const op = storeutil.OpRenewWriter
	if err := ctxErr(ctx, op, w.ThreadID); err != nil {
		return store.WriterLease{}, err
	}
	if err := storeutil.ValidateWriterArgs(op, w.Tenant, w.ThreadID, ttl); err != nil {
		return store.WriterLease{}, err
	}
	if err := s.lock(op, w.ThreadID); err != nil {
		return store.WriterLease{}, err
	}
	defer s.mu.Unlock()
	t, err := s.fence(op, w.Tenant, w.ThreadID, w)
	if err != nil {
		return store.WriterLease{}, err
	}
	t.writer.Expires = storeutil.LeaseExpiry(s.now(), ttl)
	w.ExpiresAt = t.writer.Expires
	return w, nil
}

// ReleaseWriter implements store.CheckpointStore.
func (s *Store) ReleaseWriter(ctx context.Context, w store.WriterLease) error {
	const op = storeutil.OpReleaseWriter
	if err := ctxErr(ctx, op, w.ThreadID); err != nil {
		return err
	}
	if err := s.lock(op, w.ThreadID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if t := s.ck.thread(w.Tenant, w.ThreadID, false); t != nil && t.hasW &&
		t.writer.Token == w.Token && t.writer.Fence == w.Fence {
		t.writer.Expires = time.Time{}
	}
	return nil
}

// AppendCheckpoint implements store.CheckpointStore.
func (s *Store) AppendCheckpoint(ctx context.Context, cp store.Checkpoint, expectedHead string, w store.WriterLease) (store.Checkpoint, error) {
	const op = storeutil.OpAppendCheckpoint
	if err := ctxErr(ctx, op, cp.ThreadID); err != nil {
		return store.Checkpoint{}, err
	}
	cp, err := storeutil.NormalizeCheckpoint(op, cp, s.now())
	if err != nil {
		return store.Checkpoint{}, err
	}
	if err := s.lock(op, cp.ThreadID); err != nil {
		return store.Checkpoint{}, err
	}
	defer s.mu.Unlock()
	t, err := s.fence(op, cp.Tenant, cp.ThreadID, w)
	if err != nil {
		return store.Checkpoint{}, err
	}
	_, exists := t.cps[cp.ID]
	if err := storeutil.AppendConflicts(cp, expectedHead, exists, t.head); err != nil {
		return store.Checkpoint{}, err
	}
	if err := storeutil.CheckSweep(op, cp.ThreadID, s.ck.sweep, w, s.now()); err != nil {
		return store.Checkpoint{}, err
	}
	t.cps[cp.ID] = cp
	t.head = cp.ID
	s.ck.addRefs(cp)
	return storeutil.CopyCheckpoint(cp), nil
}

// GetCheckpoint implements store.CheckpointStore.
func (s *Store) GetCheckpoint(ctx context.Context, tenant, threadID, id string) (store.Checkpoint, error) {
	const op = storeutil.OpGetCheckpoint
	if err := ctxErr(ctx, op, threadID); err != nil {
		return store.Checkpoint{}, err
	}
	if err := storeutil.ValidateCheckpointID(op, tenant, threadID, id); err != nil {
		return store.Checkpoint{}, err
	}
	if err := s.lock(op, threadID); err != nil {
		return store.Checkpoint{}, err
	}
	defer s.mu.Unlock()
	if t := s.ck.thread(tenant, threadID, false); t != nil {
		if cp, ok := t.cps[id]; ok {
			return storeutil.CopyCheckpoint(cp), nil
		}
	}
	return store.Checkpoint{}, storeutil.CheckpointNotFound(op, threadID, id)
}

// sorted returns the thread's checkpoints, oldest first (not copied).
func (t *ckThread) sorted() []store.Checkpoint {
	out := make([]store.Checkpoint, 0, len(t.cps))
	for _, cp := range t.cps {
		out = append(out, cp)
	}
	slices.SortFunc(out, storeutil.CompareCheckpoints)
	return out
}

// ListCheckpoints implements store.CheckpointStore.
func (s *Store) ListCheckpoints(ctx context.Context, tenant, threadID string) ([]store.Checkpoint, error) {
	const op = storeutil.OpListCheckpoints
	if err := ctxErr(ctx, op, threadID); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateThread(op, tenant, threadID); err != nil {
		return nil, err
	}
	if err := s.lock(op, threadID); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	t := s.ck.thread(tenant, threadID, false)
	if t == nil {
		return []store.Checkpoint{}, nil
	}
	out := t.sorted()
	for i := range out {
		out[i] = storeutil.CopyCheckpoint(out[i])
	}
	return out, nil
}

// Head implements store.CheckpointStore.
func (s *Store) Head(ctx context.Context, tenant, threadID string) (string, bool, error) {
	const op = storeutil.OpHead
	if err := ctxErr(ctx, op, threadID); err != nil {
		return "", false, err
	}
	if err := storeutil.ValidateThread(op, tenant, threadID); err != nil {
		return "", false, err
	}
	if err := s.lock(op, threadID); err != nil {
		return "", false, err
	}
	defer s.mu.Unlock()
	if t := s.ck.thread(tenant, threadID, false); t != nil && t.head != "" {
		return t.head, true, nil
	}
	return "", false, nil
}

// DeleteHead implements store.CheckpointStore.
func (s *Store) DeleteHead(ctx context.Context, tenant, threadID, id string, w store.WriterLease) error {
	const op = storeutil.OpDeleteHead
	if err := ctxErr(ctx, op, threadID); err != nil {
		return err
	}
	if err := storeutil.ValidateCheckpointID(op, tenant, threadID, id); err != nil {
		return err
	}
	if err := s.lock(op, threadID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	t, err := s.fence(op, tenant, threadID, w)
	if err != nil {
		return err
	}
	if t.head != id {
		return storeutil.NotHead(threadID, id, t.head)
	}
	cp := t.cps[id]
	delete(t.cps, id)
	s.ck.dropRefs(cp)
	t.head = ""
	if _, ok := t.cps[cp.Parent]; ok {
		t.head = cp.Parent
	}
	return nil
}

// PruneCheckpoints implements store.CheckpointStore.
func (s *Store) PruneCheckpoints(ctx context.Context, tenant, threadID string, keep int, olderThan time.Time, w store.WriterLease) (int, error) {
	const op = storeutil.OpPrune
	if err := ctxErr(ctx, op, threadID); err != nil {
		return 0, err
	}
	if err := storeutil.ValidatePrune(tenant, threadID, keep); err != nil {
		return 0, err
	}
	if err := s.lock(op, threadID); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	t, err := s.fence(op, tenant, threadID, w)
	if err != nil {
		return 0, err
	}
	ids := storeutil.PruneSet(t.sorted(), t.head, keep, olderThan)
	for _, id := range ids {
		s.ck.dropRefs(t.cps[id])
		delete(t.cps, id)
	}
	return len(ids), nil
}

// ForkCheckpoint implements store.CheckpointStore.
func (s *Store) ForkCheckpoint(ctx context.Context, tenant, srcThreadID, srcID, dstThreadID, dstID string, createdAt time.Time, w store.WriterLease) (store.Checkpoint, error) {
	const op = storeutil.OpFork
	if err := ctxErr(ctx, op, dstThreadID); err != nil {
		return store.Checkpoint{}, err
	}
	if err := storeutil.ValidateFork(tenant, srcThreadID, srcID, dstThreadID, dstID); err != nil {
		return store.Checkpoint{}, err
	}
	if err := s.lock(op, dstThreadID); err != nil {
		return store.Checkpoint{}, err
	}
	defer s.mu.Unlock()
	dst, err := s.fence(op, tenant, dstThreadID, w)
	if err != nil {
		return store.Checkpoint{}, err
	}
	var src store.Checkpoint
	var found bool
	if t := s.ck.thread(tenant, srcThreadID, false); t != nil {
		src, found = t.cps[srcID]
	}
	if !found {
		return store.Checkpoint{}, storeutil.ForkSourceNotFound(srcThreadID, srcID)
	}
	switch {
	case len(dst.cps) > 0 || dst.head != "":
		return store.Checkpoint{}, storeutil.ForkDestinationNotEmpty(dstThreadID, "checkpoints")
	case s.threadHasRuns(tenant, dstThreadID):
		return store.Checkpoint{}, storeutil.ForkDestinationNotEmpty(dstThreadID, "runs")
	}
	root := storeutil.ForkRoot(src, dstThreadID, dstID, createdAt, s.now())
	dst.cps[dstID] = root
	dst.head = dstID
	s.ck.addRefs(root)
	return storeutil.CopyCheckpoint(root), nil
}

// threadHasRuns reports whether a run record names the thread; the caller
// holds the mutex.
func (s *Store) threadHasRuns(tenant, threadID string) bool {
	for _, r := range s.runs {
		if r.run.ThreadID == threadID && r.run.Tenant == tenant {
			return true
		}
	}
	return false
}

// BlobReferences implements store.CheckpointStore.
func (s *Store) BlobReferences(ctx context.Context) ([]store.BlobRef, error) {
	const op = storeutil.OpBlobReferences
	if err := ctxErr(ctx, op, ""); err != nil {
		return nil, err
	}
	if err := s.lock(op, ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]store.BlobRef, 0, len(s.ck.refs))
	for d, n := range s.ck.refs {
		out = append(out, store.BlobRef{Digest: d, References: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Digest < out[j].Digest })
	return out, nil
}

// --- blobs -------------------------------------------------------------------

// PutBlob implements store.BlobStore.
func (s *Store) PutBlob(ctx context.Context, digest string, data io.Reader, size int64) error {
	const op = storeutil.OpPutBlob
	if err := ctxErr(ctx, op, digest); err != nil {
		return err
	}
	b, err := storeutil.ReadBlob(ctx, op, digest, data, size)
	if err != nil {
		return err
	}
	if err := s.lock(op, digest); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.ck.blobs[digest]; !ok {
		s.ck.blobs[digest] = b
	}
	return nil
}

// HasBlob implements store.BlobStore.
func (s *Store) HasBlob(ctx context.Context, digest string) (bool, error) {
	const op = storeutil.OpHasBlob
	if err := ctxErr(ctx, op, digest); err != nil {
		return false, err
	}
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return false, err
	}
	if err := s.lock(op, digest); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	_, ok := s.ck.blobs[digest]
	return ok, nil
}

// OpenBlob implements store.BlobStore.
func (s *Store) OpenBlob(ctx context.Context, digest string) (io.ReadCloser, error) {
	const op = storeutil.OpOpenBlob
	if err := ctxErr(ctx, op, digest); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return nil, err
	}
	if err := s.lock(op, digest); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	b, ok := s.ck.blobs[digest]
	if !ok {
		return nil, storeutil.BlobNotFound(op, digest)
	}
	// Stored bytes are never changed in place, so the reader may share them.
	return io.NopCloser(bytes.NewReader(b)), nil
}

// DeleteBlob implements store.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, digest string) error {
	const op = storeutil.OpDeleteBlob
	if err := ctxErr(ctx, op, digest); err != nil {
		return err
	}
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return err
	}
	if err := s.lock(op, digest); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.ck.blobs, digest)
	return nil
}

// ListBlobs implements store.BlobStore.
func (s *Store) ListBlobs(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	const op = storeutil.OpListBlobs
	if err := ctxErr(ctx, op, ""); err != nil {
		return nil, "", err
	}
	after, err := storeutil.ParseBlobCursor(op, cursor)
	if err != nil {
		return nil, "", err
	}
	if limit, err = storeutil.BlobLimit(op, limit); err != nil {
		return nil, "", err
	}
	if err := s.lock(op, ""); err != nil {
		return nil, "", err
	}
	defer s.mu.Unlock()
	var all []string
	for d := range s.ck.blobs {
		if d > after {
			all = append(all, d)
		}
	}
	slices.Sort(all)
	if len(all) <= limit {
		return all, "", nil
	}
	page := all[:limit]
	return page, storeutil.BlobCursor(page[len(page)-1]), nil
}
