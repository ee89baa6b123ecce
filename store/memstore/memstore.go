// Package memstore is an in-process store.Store: maps behind one mutex.
//
// It is for tests, development and single-process use where losing
// everything at exit is acceptable. Its Locker excludes goroutines of this
// process only (another process, or another memstore, does not see its
// locks), but honours leases, TTL expiry and fencing tokens exactly like the
// database stores.
package memstore

import (
	"context"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/lease"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// Options configures a Store.
type Options struct {
	// Logger receives lease warnings; nil discards them.
	Logger *slog.Logger
	// Now replaces the wall clock for record timestamps and for the expiry
	// of checkpoint writer leases (not for Locker leases, which use the
	// monotonic clock); nil means time.Now.
	Now func() time.Time
}

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	log *slog.Logger
	now func() time.Time

	mu        sync.Mutex
	closed    bool
	instances map[string]store.Instance
	runs      map[string]*runEntry
	locks     map[string]*lockEntry
	ck        ckState // checkpoints, writer leases and blobs (checkpoints.go)

	leases lease.Registry
}

type runEntry struct {
	run    store.Run
	events []store.Event
	bytes  int64 // the sum of the events' Data lengths
	closed bool
	pruned int64 // events deleted by PruneEvents: seq pruned+i+1 is events[i]
}

// lastSeq is the seq of the log's last event, pruned ones included.
func (e *runEntry) lastSeq() int64 { return e.pruned + int64(len(e.events)) }

type lockEntry struct {
	token   int64     // the last token issued for the name
	held    bool      // token's holder has not released
	expires time.Time // monotonic; the holder's lease ends here unless renewed
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{
		log:       opts.Logger,
		now:       opts.Now,
		instances: make(map[string]store.Instance),
		runs:      make(map[string]*runEntry),
		locks:     make(map[string]*lockEntry),
		ck:        newCkState(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

func (s *Store) nowMS() time.Time { return store.Millis(s.now()) }

// lock takes the mutex and refuses a closed store.
func (s *Store) lock(op, id string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return sandbox.Errorf(sandbox.FailedPrecondition, op, id, "store is closed")
	}
	return nil
}

func ctxErr(ctx context.Context, op, id string) error {
	if err := ctx.Err(); err != nil {
		return sandbox.Wrap(sandbox.Canceled, op, id, err)
	}
	return nil
}

// Close releases the live leases and makes the store unusable.
func (s *Store) Close() error {
	s.leases.ReleaseAll(time.Second)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// --- instances ---------------------------------------------------------------

// GetInstance implements store.InstanceStore.
func (s *Store) GetInstance(ctx context.Context, key string) (store.Instance, bool, error) {
	if err := ctxErr(ctx, storeutil.OpGetInstance, key); err != nil {
		return store.Instance{}, false, err
	}
	if err := s.lock(storeutil.OpGetInstance, key); err != nil {
		return store.Instance{}, false, err
	}
	defer s.mu.Unlock()
	inst, ok := s.instances[key]
	return inst, ok, nil
}

// PutInstance implements store.InstanceStore.
func (s *Store) PutInstance(ctx context.Context, inst store.Instance) error {
	if err := ctxErr(ctx, storeutil.OpPutInstance, inst.Key); err != nil {
		return err
	}
	inst, err := storeutil.NormalizeInstance(inst, s.nowMS())
	if err != nil {
		return err
	}
	if err := s.lock(storeutil.OpPutInstance, inst.Key); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if inst.CreatedAt.IsZero() {
		if old, ok := s.instances[inst.Key]; ok {
			inst.CreatedAt = old.CreatedAt
		} else {
			inst.CreatedAt = inst.UpdatedAt
		}
	}
	s.instances[inst.Key] = inst
	return nil
}

// DeleteInstance implements store.InstanceStore.
func (s *Store) DeleteInstance(ctx context.Context, key string) error {
	if err := ctxErr(ctx, storeutil.OpDeleteInstance, key); err != nil {
		return err
	}
	if err := s.lock(storeutil.OpDeleteInstance, key); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.instances, key)
	return nil
}

// ListInstances implements store.InstanceStore.
func (s *Store) ListInstances(ctx context.Context, f store.InstanceFilter) ([]store.Instance, error) {
	if err := ctxErr(ctx, storeutil.OpListInstances, ""); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateLimit(storeutil.OpListInstances, f.Limit); err != nil {
		return nil, err
	}
	if err := s.lock(storeutil.OpListInstances, ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	before := f.UpdatedBefore.UnixMilli()
	var out []store.Instance
	for _, inst := range s.instances {
		switch {
		case f.Provider != "" && inst.Provider != f.Provider,
			f.ThreadID != "" && inst.ThreadID != f.ThreadID,
			f.Tenant != "" && inst.Tenant != f.Tenant,
			!f.UpdatedBefore.IsZero() && inst.UpdatedAt.UnixMilli() >= before:
			continue
		}
		out = append(out, inst)
	}
	sort.Slice(out, func(i, j int) bool {
		if c := out[i].UpdatedAt.Compare(out[j].UpdatedAt); c != 0 {
			return c < 0
		}
		return out[i].Key < out[j].Key
	})
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// --- runs --------------------------------------------------------------------

func copyRun(r store.Run) store.Run {
	if r.ExitCode != nil {
		c := *r.ExitCode
		r.ExitCode = &c
	}
	return r
}

// CreateRun implements store.RunStore.
func (s *Store) CreateRun(ctx context.Context, r store.Run) error {
	if err := ctxErr(ctx, storeutil.OpCreateRun, r.ID); err != nil {
		return err
	}
	r, err := storeutil.NormalizeRun(r, s.nowMS())
	if err != nil {
		return err
	}
	if err := s.lock(storeutil.OpCreateRun, r.ID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.runs[r.ID]; ok {
		return sandbox.Errorf(sandbox.AlreadyExists, storeutil.OpCreateRun, r.ID, "run exists")
	}
	s.runs[r.ID] = &runEntry{run: r}
	return nil
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, id string) (store.Run, bool, error) {
	if err := ctxErr(ctx, storeutil.OpGetRun, id); err != nil {
		return store.Run{}, false, err
	}
	if err := s.lock(storeutil.OpGetRun, id); err != nil {
		return store.Run{}, false, err
	}
	defer s.mu.Unlock()
	e, ok := s.runs[id]
	if !ok {
		return store.Run{}, false, nil
	}
	return copyRun(e.run), true, nil
}

// UpdateRun implements store.RunStore.
func (s *Store) UpdateRun(ctx context.Context, id string, p store.RunPatch) (store.Run, error) {
	if err := ctxErr(ctx, storeutil.OpUpdateRun, id); err != nil {
		return store.Run{}, err
	}
	if _, err := storeutil.PatchAssignments(id, p); err != nil {
		return store.Run{}, err
	}
	if err := s.lock(storeutil.OpUpdateRun, id); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()
	e, ok := s.runs[id]
	if !ok {
		return store.Run{}, storeutil.RunNotFound(storeutil.OpUpdateRun, id)
	}
	if err := storeutil.CheckPatchFences(id, e.run.Status, e.run.DriverEpoch, p); err != nil {
		return store.Run{}, err
	}
	e.run = storeutil.ApplyPatch(e.run, p, s.nowMS())
	return copyRun(e.run), nil
}

// ClaimRun implements store.RunStore.
func (s *Store) ClaimRun(ctx context.Context, id string, expectEpoch int64) (store.Run, error) {
	if err := ctxErr(ctx, storeutil.OpClaimRun, id); err != nil {
		return store.Run{}, err
	}
	if err := s.lock(storeutil.OpClaimRun, id); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()
	e, ok := s.runs[id]
	if !ok {
		return store.Run{}, storeutil.RunNotFound(storeutil.OpClaimRun, id)
	}
	if err := storeutil.CheckClaim(id, e.run.Status, e.run.DriverEpoch, expectEpoch); err != nil {
		return store.Run{}, err
	}
	e.run.DriverEpoch++
	e.run.UpdatedAt = s.nowMS()
	return copyRun(e.run), nil
}

func runLess(a, b store.Run) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// ActiveRun implements store.RunStore.
func (s *Store) ActiveRun(ctx context.Context, threadID, tenant string) (store.Run, bool, error) {
	if err := ctxErr(ctx, storeutil.OpActiveRun, threadID); err != nil {
		return store.Run{}, false, err
	}
	if err := s.lock(storeutil.OpActiveRun, threadID); err != nil {
		return store.Run{}, false, err
	}
	defer s.mu.Unlock()
	var best *store.Run
	for _, e := range s.runs {
		r := &e.run
		if r.ThreadID != threadID || r.Tenant != tenant || r.Status.Terminal() {
			continue
		}
		if best == nil || runLess(*r, *best) > 0 {
			best = r
		}
	}
	if best == nil {
		return store.Run{}, false, nil
	}
	return copyRun(*best), true, nil
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	if err := ctxErr(ctx, storeutil.OpListRuns, ""); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateLimit(storeutil.OpListRuns, f.Limit); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateStatuses(storeutil.OpListRuns, f.Statuses); err != nil {
		return nil, err
	}
	if err := s.lock(storeutil.OpListRuns, ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	before := f.UpdatedBefore.UnixMilli()
	var out []store.Run
	for _, e := range s.runs {
		r := e.run
		switch {
		case f.ThreadID != "" && r.ThreadID != f.ThreadID,
			f.Tenant != "" && r.Tenant != f.Tenant,
			len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status),
			!f.UpdatedBefore.IsZero() && r.UpdatedAt.UnixMilli() >= before:
			continue
		}
		out = append(out, copyRun(r))
	}
	slices.SortFunc(out, runLess)
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

// ListReclaimable implements store.RunStore.
func (s *Store) ListReclaimable(ctx context.Context, detachedBefore time.Time, limit int) ([]store.Run, error) {
	if err := ctxErr(ctx, storeutil.OpReclaimable, ""); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateLimit(storeutil.OpReclaimable, limit); err != nil {
		return nil, err
	}
	if err := s.lock(storeutil.OpReclaimable, ""); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	cutoff := detachedBefore.UnixMilli()
	var out []store.Run
	for _, e := range s.runs {
		r := e.run
		if r.Status.Terminal() || r.DetachedSince.IsZero() || r.DetachedSince.UnixMilli() > cutoff {
			continue
		}
		out = append(out, copyRun(r))
	}
	slices.SortFunc(out, func(a, b store.Run) int {
		if c := a.DetachedSince.Compare(b.DetachedSince); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// --- events ------------------------------------------------------------------

func (s *Store) runEntry(op, id string) (*runEntry, error) {
	e, ok := s.runs[id]
	if !ok {
		return nil, storeutil.RunNotFound(op, id)
	}
	return e, nil
}

// AppendEvents implements store.EventLog.
func (s *Store) AppendEvents(ctx context.Context, runID string, epoch, firstSeq int64, events []store.NewEvent) error {
	if err := ctxErr(ctx, storeutil.OpAppend, runID); err != nil {
		return err
	}
	if err := storeutil.ValidateEvents(runID, firstSeq, events); err != nil {
		return err
	}
	if err := s.lock(storeutil.OpAppend, runID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpAppend, runID)
	if err != nil {
		return err
	}
	if err := storeutil.CheckAppend(runID, epoch, e.run.DriverEpoch, e.closed, e.lastSeq(), firstSeq); err != nil {
		return err
	}
	now := s.nowMS()
	for i, ev := range events {
		e.events = append(e.events, store.Event{
			RunID: runID, Seq: firstSeq + int64(i), Type: ev.Type,
			Data: storeutil.CopyData(ev.Data), Time: storeutil.EventTime(ev.Time, now),
		})
	}
	e.bytes += storeutil.DataBytes(events)
	return nil
}

// ReadEvents implements store.EventLog.
func (s *Store) ReadEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]store.Event, error) {
	if err := ctxErr(ctx, storeutil.OpRead, runID); err != nil {
		return nil, err
	}
	if err := storeutil.ValidateLimit(storeutil.OpRead, limit); err != nil {
		return nil, err
	}
	if err := s.lock(storeutil.OpRead, runID); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpRead, runID)
	if err != nil {
		return nil, err
	}
	start := min(max(afterSeq-e.pruned, 0), int64(len(e.events)))
	evs := e.events[start:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	out := make([]store.Event, len(evs))
	for i, ev := range evs {
		ev.Data = storeutil.CopyData(ev.Data)
		out[i] = ev
	}
	return out, nil
}

// LastSeq implements store.EventLog.
func (s *Store) LastSeq(ctx context.Context, runID string) (int64, error) {
	if err := ctxErr(ctx, storeutil.OpLastSeq, runID); err != nil {
		return 0, err
	}
	if err := s.lock(storeutil.OpLastSeq, runID); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpLastSeq, runID)
	if err != nil {
		return 0, err
	}
	return e.lastSeq(), nil
}

// LogSize implements store.EventLog.
func (s *Store) LogSize(ctx context.Context, runID string) (int64, error) {
	if err := ctxErr(ctx, storeutil.OpLogSize, runID); err != nil {
		return 0, err
	}
	if err := s.lock(storeutil.OpLogSize, runID); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpLogSize, runID)
	if err != nil {
		return 0, err
	}
	return e.bytes, nil
}

// CloseLog implements store.EventLog.
func (s *Store) CloseLog(ctx context.Context, runID string, epoch int64) error {
	if err := ctxErr(ctx, storeutil.OpCloseLog, runID); err != nil {
		return err
	}
	if err := s.lock(storeutil.OpCloseLog, runID); err != nil {
		return err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpCloseLog, runID)
	if err != nil {
		return err
	}
	if _, err := storeutil.CheckClose(runID, epoch, e.run.DriverEpoch, e.closed); err != nil {
		return err
	}
	e.closed = true
	return nil
}

// LogClosed implements store.EventLog.
func (s *Store) LogClosed(ctx context.Context, runID string) (bool, error) {
	if err := ctxErr(ctx, storeutil.OpLogClosed, runID); err != nil {
		return false, err
	}
	if err := s.lock(storeutil.OpLogClosed, runID); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	e, err := s.runEntry(storeutil.OpLogClosed, runID)
	if err != nil {
		return false, err
	}
	return e.closed, nil
}

// --- locks -------------------------------------------------------------------

// TryLock implements store.Locker.
func (s *Store) TryLock(ctx context.Context, name string, ttl time.Duration) (store.Lease, bool, error) {
	if err := ctxErr(ctx, storeutil.OpLock, name); err != nil {
		return nil, false, err
	}
	if err := storeutil.ValidateLockArgs(name, ttl); err != nil {
		return nil, false, err
	}
	if err := s.lock(storeutil.OpLock, name); err != nil {
		return nil, false, err
	}
	start := time.Now()
	e := s.locks[name]
	if e == nil {
		e = &lockEntry{}
		s.locks[name] = e
	}
	if e.held && start.Before(e.expires) {
		s.mu.Unlock()
		return nil, false, nil
	}
	e.token++
	e.held = true
	e.expires = start.Add(ttl)
	token := e.token
	s.mu.Unlock()

	l := lease.Start(lease.Config{
		Name: name, Token: token, TTL: ttl, Start: start,
		Backend: &memLease{s: s, name: name, token: token, ttl: ttl},
		Logger:  s.log, OnEnd: s.leases.Remove,
	})
	s.leases.Add(l)
	return l, true, nil
}

// Lock implements store.Locker.
func (s *Store) Lock(ctx context.Context, name string, ttl time.Duration) (store.Lease, error) {
	return lease.Wait(ctx, name, &s.leases.Waker, func(ctx context.Context) (store.Lease, bool, error) {
		return s.TryLock(ctx, name, ttl)
	})
}

type memLease struct {
	s     *Store
	name  string
	token int64
	ttl   time.Duration
}

func (m *memLease) Renew(context.Context) (bool, error) {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	e := m.s.locks[m.name]
	if e == nil || e.token != m.token || !e.held {
		return false, nil
	}
	e.expires = time.Now().Add(m.ttl)
	return true, nil
}

func (m *memLease) Release(context.Context) error {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	if e := m.s.locks[m.name]; e != nil && e.token == m.token {
		e.held = false
	}
	return nil
}
