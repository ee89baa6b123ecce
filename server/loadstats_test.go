package server_test

// What the load test measures besides correctness: the latency of every
// store call (p50/p99/max per call and calls per run), the sandbox
// commands a run costs, and the CPU of this process and the processes it
// reaped (the agents' wrappers and everything they ran).

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// timedStore measures the latency of every store call.
type timedStore struct {
	store.Store
	mu    sync.Mutex
	calls map[string][]time.Duration
}

func (s *timedStore) observe(name string, began time.Time) {
	d := time.Since(began)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string][]time.Duration{}
	}
	s.calls[name] = append(s.calls[name], d)
}

// quantile returns the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// summary returns every call's p50 and p99 and the p99 over all calls.
func (s *timedStore) summary(runs int) (report string, p50, p99 time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.calls))
	var all []time.Duration
	for n, ds := range s.calls {
		names = append(names, n)
		all = append(all, ds...)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		ds := slices.Clone(s.calls[n])
		slices.Sort(ds)
		fmt.Fprintf(&b, "  %-14s %6d calls (%4.1f/run)  p50 %8v  p99 %8v  max %8v\n", n, len(ds), float64(len(ds))/float64(runs),
			quantile(ds, .5).Round(10*time.Microsecond), quantile(ds, .99).Round(10*time.Microsecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	slices.Sort(all)
	return b.String(), quantile(all, .5), quantile(all, .99)
}

func (s *timedStore) CreateRun(ctx context.Context, r store.Run) error {
	defer s.observe("CreateRun", time.Now())
	return s.Store.CreateRun(ctx, r)
}

func (s *timedStore) GetRun(ctx context.Context, id string) (store.Run, bool, error) {
	defer s.observe("GetRun", time.Now())
	return s.Store.GetRun(ctx, id)
}

func (s *timedStore) UpdateRun(ctx context.Context, id string, p store.RunPatch) (store.Run, error) {
	defer s.observe("UpdateRun", time.Now())
	return s.Store.UpdateRun(ctx, id, p)
}

func (s *timedStore) ClaimRun(ctx context.Context, id string, epoch int64) (store.Run, error) {
	defer s.observe("ClaimRun", time.Now())
	return s.Store.ClaimRun(ctx, id, epoch)
}

func (s *timedStore) ActiveRun(ctx context.Context, thread, tenant string) (store.Run, bool, error) {
	defer s.observe("ActiveRun", time.Now())
	return s.Store.ActiveRun(ctx, thread, tenant)
}

func (s *timedStore) ListRuns(ctx context.Context, f store.RunFilter) ([]store.Run, error) {
	defer s.observe("ListRuns", time.Now())
	return s.Store.ListRuns(ctx, f)
}

func (s *timedStore) AppendEvents(ctx context.Context, id string, epoch, first int64, evs []store.NewEvent) error {
	defer s.observe("AppendEvents", time.Now())
	return s.Store.AppendEvents(ctx, id, epoch, first, evs)
}

func (s *timedStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	defer s.observe("ReadEvents", time.Now())
	return s.Store.ReadEvents(ctx, id, after, limit)
}

func (s *timedStore) LastSeq(ctx context.Context, id string) (int64, error) {
	defer s.observe("LastSeq", time.Now())
	return s.Store.LastSeq(ctx, id)
}

func (s *timedStore) CloseLog(ctx context.Context, id string, epoch int64) error {
	defer s.observe("CloseLog", time.Now())
	return s.Store.CloseLog(ctx, id, epoch)
}

func (s *timedStore) LogClosed(ctx context.Context, id string) (bool, error) {
	defer s.observe("LogClosed", time.Now())
	return s.Store.LogClosed(ctx, id)
}

func (s *timedStore) GetInstance(ctx context.Context, key string) (store.Instance, bool, error) {
	defer s.observe("GetInstance", time.Now())
	return s.Store.GetInstance(ctx, key)
}

func (s *timedStore) PutInstance(ctx context.Context, in store.Instance) error {
	defer s.observe("PutInstance", time.Now())
	return s.Store.PutInstance(ctx, in)
}

func (s *timedStore) Lock(ctx context.Context, name string, ttl time.Duration) (store.Lease, error) {
	began := time.Now()
	l, err := s.Store.Lock(ctx, name, ttl)
	s.observe("Lock", began)
	if err != nil {
		return nil, err
	}
	return &timedLease{Lease: l, s: s}, nil
}

func (s *timedStore) TryLock(ctx context.Context, name string, ttl time.Duration) (store.Lease, bool, error) {
	began := time.Now()
	l, ok, err := s.Store.TryLock(ctx, name, ttl)
	s.observe("TryLock", began)
	if err != nil || !ok {
		return l, ok, err
	}
	return &timedLease{Lease: l, s: s}, true, nil
}

// timedLease measures Release (renewals run inside the store).
type timedLease struct {
	store.Lease
	s *timedStore
}

func (l *timedLease) Release(ctx context.Context) error {
	defer l.s.observe("Release", time.Now())
	return l.Lease.Release(ctx)
}

// countingHandle counts the commands run in a sandbox.
type countingHandle struct {
	sandbox.Handle
	execs, spawns *atomic.Int64
}

func (h *countingHandle) Unwrap() sandbox.Handle { return h.Handle }

func (h *countingHandle) Exec(ctx context.Context, c sandbox.Command) (*sandbox.ExecResult, error) {
	h.execs.Add(1)
	return h.Handle.Exec(ctx, c)
}

func (h *countingHandle) Spawn(ctx context.Context, c sandbox.Command) (sandbox.Process, error) {
	h.spawns.Add(1)
	return h.Handle.Spawn(ctx, c)
}

// SpawnInCgroup counts the wrapper's spawn where the handle starts it in
// the run's cgroup (sandbox.CgroupSpawner; the journal reaches it by As).
func (h *countingHandle) SpawnInCgroup(ctx context.Context, c sandbox.Command, dir string) (sandbox.Process, error) {
	var cs sandbox.CgroupSpawner
	if !sandbox.As(h.Handle, &cs) {
		return nil, sandbox.Errorf(sandbox.Unimplemented, "test.spawn", dir, "no cgroup spawns")
	}
	h.spawns.Add(1)
	return cs.SpawnInCgroup(ctx, c, dir)
}

// cpuTime is the CPU (user and system) used so far by this process and
// by the processes it waited for (theirs include their own waited-for
// descendants).
func cpuTime() (self, children time.Duration) {
	var s, c syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &s)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c)
	tv := func(u syscall.Rusage) time.Duration {
		return time.Duration(u.Utime.Nano() + u.Stime.Nano())
	}
	return tv(s), tv(c)
}
