package server_test

// Load on loopback: many short runs started at once through one daemon
// (in-process runner over SQLite, local provider, default lease TTL), each
// streamed to its end by the Go client. It asserts correctness (every run
// completed with its one line) and a generous memory bound; timings are
// only logged, with the store's call latencies and the scheduler's timer
// lateness so that a failure explains itself.

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// vmHWM returns the peak resident set size of this process, in bytes.
func vmHWM(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			f := strings.Fields(rest) // "123456 kB"
			if len(f) != 2 || f[1] != "kB" {
				t.Fatalf("bad VmHWM line %q", sc.Text())
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				t.Fatalf("bad VmHWM line %q", sc.Text())
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// timedStore measures the latency of the store calls a run makes most.
type timedStore struct {
	store.Store
	mu    sync.Mutex
	calls map[string]*callStats
}

type callStats struct {
	n        int
	sum, max time.Duration
}

func (s *timedStore) observe(name string, began time.Time) {
	d := time.Since(began)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]*callStats{}
	}
	c := s.calls[name]
	if c == nil {
		c = &callStats{}
		s.calls[name] = c
	}
	c.n++
	c.sum += d
	c.max = max(c.max, d)
}

func (s *timedStore) report() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.calls))
	for n := range s.calls {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		c := s.calls[n]
		fmt.Fprintf(&b, "  %-12s %5d calls, mean %v, max %v\n", n, c.n, (c.sum / time.Duration(c.n)).Round(time.Millisecond), c.max.Round(time.Millisecond))
	}
	return b.String()
}

func (s *timedStore) CreateRun(ctx context.Context, r store.Run) error {
	defer s.observe("CreateRun", time.Now())
	return s.Store.CreateRun(ctx, r)
}

func (s *timedStore) GetRun(ctx context.Context, id string) (store.Run, bool, error) {
	defer s.observe("GetRun", time.Now())
	return s.Store.GetRun(ctx, id)
}

func (s *timedStore) ClaimRun(ctx context.Context, id string, epoch int64) (store.Run, error) {
	defer s.observe("ClaimRun", time.Now())
	return s.Store.ClaimRun(ctx, id, epoch)
}

func (s *timedStore) AppendEvents(ctx context.Context, id string, epoch, first int64, evs []store.NewEvent) error {
	defer s.observe("AppendEvents", time.Now())
	return s.Store.AppendEvents(ctx, id, epoch, first, evs)
}

func (s *timedStore) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	defer s.observe("ReadEvents", time.Now())
	return s.Store.ReadEvents(ctx, id, after, limit)
}

func (s *timedStore) Lock(ctx context.Context, name string, ttl time.Duration) (store.Lease, error) {
	defer s.observe("Lock", time.Now())
	return s.Store.Lock(ctx, name, ttl)
}

func (s *timedStore) TryLock(ctx context.Context, name string, ttl time.Duration) (store.Lease, bool, error) {
	defer s.observe("TryLock", time.Now())
	return s.Store.TryLock(ctx, name, ttl)
}

// lateness measures how late a 50ms timer fires, at most, until stopped.
func lateness() (stop func() time.Duration) {
	quit, done := make(chan struct{}), make(chan time.Duration)
	go func() {
		var worst time.Duration
		for {
			began := time.Now()
			select {
			case <-quit:
				done <- worst
				return
			case <-time.After(50 * time.Millisecond):
			}
			worst = max(worst, time.Since(began)-50*time.Millisecond)
		}
	}()
	return func() time.Duration { close(quit); return <-done }
}

// countingHandler counts the warnings the runner and the store log, by
// message.
type countingHandler struct {
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *countingHandler) WithGroup(string) slog.Handler                { return h }
func (h *countingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.counts == nil {
		h.counts = map[string]int{}
	}
	h.counts[r.Message]++
	return nil
}

func (h *countingHandler) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.counts)
}

var runIDRE = regexp.MustCompile(`run-[0-9a-f]+-[0-9a-f]+`)

func TestLoadConcurrentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("the load test is skipped under -short")
	}
	runs := 200
	if v, err := strconv.Atoi(os.Getenv("CORRAL_LOAD_RUNS")); err == nil && v > 0 {
		runs = v
	}
	const memLimit = 2 << 30
	ctx := testCtx(t, 4*time.Minute)
	warnings := &countingHandler{}
	logger := slog.New(warnings)
	sq, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	st := &timedStore{Store: sq}
	e := newEnv(t, envOptions{Store: st, RunOpts: run.Options{Logger: logger}})
	c := e.client("")
	hwmBefore := vmHWM(t)

	type result struct {
		id     string
		lines  []string
		last   event.Type
		events int64
		err    error
	}
	results := make([]result, runs)
	var wg sync.WaitGroup
	ready := make(chan struct{})
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-ready
			res := &results[i]
			r, err := c.Start(ctx, api.StartRun{Thread: fmt.Sprintf("load-%d", i), Prompt: "echo hi"})
			if err != nil {
				res.err = fmt.Errorf("start: %w", err)
				return
			}
			res.id = r.ID
			res.err = c.Events(ctx, r.ID, 0, func(ev store.Event) error {
				if ev.Seq != res.events+1 {
					return fmt.Errorf("seq %d after %d", ev.Seq, res.events)
				}
				res.events = ev.Seq
				e, err := event.Unmarshal(ev.Data)
				if err != nil {
					return err
				}
				res.last = e.Type
				if e.Type == event.TextMessageContent {
					res.lines = append(res.lines, e.Delta)
				}
				return nil
			})
		}()
	}
	stopLateness := lateness()
	began := time.Now()
	close(ready)
	wg.Wait()
	elapsed := time.Since(began)
	late := stopLateness()

	failed := 0
	why := map[string]int{}
	for i, res := range results {
		bad := ""
		switch {
		case res.err != nil:
			bad = res.err.Error()
		case len(res.lines) != 1 || res.lines[0] != "hi\n":
			bad = fmt.Sprintf("lines %q, want [hi]", res.lines)
		case res.last != event.RunFinished:
			bad = fmt.Sprintf("last event %s, want RUN_FINISHED", res.last)
		}
		rec, ok, err := sq.GetRun(ctx, res.id)
		switch {
		case res.id == "":
		case err != nil || !ok:
			bad += fmt.Sprintf(" (reading the run: ok=%v %v)", ok, err)
		case rec.Status != store.RunCompleted:
			bad += fmt.Sprintf(" (run %s: %s)", rec.Status, rec.Error)
			why[runIDRE.ReplaceAllString(string(rec.Status)+": "+rec.Error, "RUN")]++
		}
		if bad != "" {
			failed++
			if failed <= 5 {
				t.Errorf("run %d (%s): %s", i, res.id, bad)
			}
		}
	}
	all, err := sq.ListRuns(ctx, store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[store.RunStatus]int{}
	for _, r := range all {
		byStatus[r.Status]++
	}
	hwm := vmHWM(t)
	ttl := "default 10s"
	if v := os.Getenv("CORRAL_LEASE_TTL"); v != "" {
		ttl = "CORRAL_LEASE_TTL=" + v
	}
	t.Logf("%d concurrent runs (SQLite, local provider, lease TTL %s) through one daemon: %d failed; store by status %v",
		runs, ttl, failed, byStatus)
	t.Logf("total %v, %.1f runs/s; peak RSS (VmHWM) %.1f MiB (%.1f MiB before the runs); worst timer lateness %v",
		elapsed.Round(time.Millisecond), float64(runs)/elapsed.Seconds(), float64(hwm)/(1<<20), float64(hwmBefore)/(1<<20), late.Round(time.Millisecond))
	t.Logf("store call latency:\n%s", st.report())
	if failed > 0 {
		t.Logf("warnings logged: %s", warnings)
		for w, n := range why {
			t.Logf("%4d runs ended %s", n, w)
		}
		t.Fatalf("%d of %d runs did not complete", failed, runs)
	}
	if len(all) != runs || byStatus[store.RunCompleted] != runs {
		t.Fatalf("the store holds %d runs (%v), want %d completed", len(all), byStatus, runs)
	}
	if hwm >= memLimit {
		t.Fatalf("peak RSS %d MiB, want under %d MiB", hwm>>20, memLimit>>20)
	}
}
