package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// ListForgettable implements store.Forgetter.
func (s *Store) ListForgettable(ctx context.Context, finishedBefore time.Time, limit int) ([]store.Run, error) {
	if err := ctxErr(ctx, storeutil.OpForgettable, ""); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateLimit(storeutil.OpForgettable, limit); err != nil {
		return nil, err
	}
	if err := s.lock(storeutil.OpForgettable, ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	cut := store.Millis(finishedBefore)
	var out []store.Run
	for _, e := range s.runs {
		r := e.run
		if r.Status.Terminal() && r.Retention.Forgets() && r.ForgottenAt.IsZero() && !r.FinishedAt.IsZero() && !r.FinishedAt.After(cut) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.Run) int {
		return cmp.Or(a.FinishedAt.Compare(b.FinishedAt), cmp.Compare(a.ID, b.ID))
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// ForgetRun implements store.Forgetter.
func (s *Store) ForgetRun(ctx context.Context, runID string, keep func(store.Event) json.RawMessage) error {
	if err := ctxErr(ctx, storeutil.OpForget, runID); err != nil {
		return err
	}
	if err := s.lock(storeutil.OpForget, runID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpForget, runID)
	if err != nil {
		return err
	}
	todo, err := storeutil.CheckForget(e.run)
	if err != nil || !todo {
		return err
	}
	if e.run.Retention == store.RetainNone {
		delete(s.runs, runID)
		return nil
	}
	var bytes int64
	for i, ev := range e.events {
		e.events[i].Data = storeutil.KeptData(keep, ev)
		bytes += int64(len(e.events[i].Data))
	}
	e.bytes = bytes
	e.run.Prompt, e.run.Error = "", ""
	e.run.ForgottenAt = s.nowMS()
	e.run.UpdatedAt = e.run.ForgottenAt
	return nil
}

// PruneEvents implements store.Forgetter.
func (s *Store) PruneEvents(ctx context.Context, finishedBefore time.Time, limit int) (int, error) {
	if err := ctxErr(ctx, storeutil.OpPruneEvents, ""); err != nil {
		return 0, err
	}
	if err := storeutil.ValidateLimit(storeutil.OpPruneEvents, limit); err != nil {
		return 0, err
	}
	if err := s.lock(storeutil.OpPruneEvents, ""); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	cut := store.Millis(finishedBefore)
	var cands []*runEntry
	for _, e := range s.runs {
		r := e.run
		if r.Status.Terminal() && !r.FinishedAt.IsZero() && !r.FinishedAt.After(cut) && len(e.events) > 0 {
			cands = append(cands, e)
		}
	}
	slices.SortFunc(cands, func(a, b *runEntry) int {
		return cmp.Or(a.run.FinishedAt.Compare(b.run.FinishedAt), cmp.Compare(a.run.ID, b.run.ID))
	})
	if limit > 0 && len(cands) > limit {
		cands = cands[:limit]
	}
	for _, e := range cands {
		e.pruned += int64(len(e.events))
		e.events, e.bytes = nil, 0
	}
	return len(cands), nil
}
