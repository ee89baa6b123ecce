package memstore

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// BeginBlobSweep implements store.CheckpointStore.
func (s *Store) BeginBlobSweep(ctx context.Context, ttl time.Duration) (store.BlobSweep, error) {
	const op = storeutil.OpBeginSweep
	if err := ctxErr(ctx, op, ""); err != nil {
		return store.BlobSweep{}, err
	}
	if err := s.lock(op, ""); err != nil {
		return store.BlobSweep{}, err
	}
	defer s.mu.Unlock()
	row, err := storeutil.BeginSweep(s.ck.sweep, s.now(), ttl)
	if err != nil {
		return store.BlobSweep{}, err
	}
	s.ck.sweep = row
	return store.BlobSweep{Gen: row.Gen, ExpiresAt: row.Expires}, nil
}

// EndBlobSweep implements store.CheckpointStore.
func (s *Store) EndBlobSweep(ctx context.Context, sw store.BlobSweep) error {
	const op = storeutil.OpEndSweep
	if err := ctxErr(ctx, op, ""); err != nil {
		return err
	}
	if err := s.lock(op, ""); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.ck.sweep, _ = storeutil.EndSweep(s.ck.sweep, sw)
	return nil
}

// ListCheckpointThreads implements store.CheckpointStore.
func (s *Store) ListCheckpointThreads(ctx context.Context) ([]store.ThreadRef, error) {
	const op = storeutil.OpListCkThreads
	if err := ctxErr(ctx, op, ""); err != nil {
		return nil, err
	}
	if err := s.lock(op, ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []store.ThreadRef{}
	for k, t := range s.ck.threads {
		if len(t.cps) > 0 {
			out = append(out, store.ThreadRef{Tenant: k.tenant, ThreadID: k.thread})
		}
	}
	slices.SortFunc(out, func(a, b store.ThreadRef) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.ThreadID, b.ThreadID))
	})
	return out, nil
}
