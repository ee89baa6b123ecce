package server_test

// Load on loopback: many short runs started at once through one daemon
// (in-process runner over SQLite, then over PostgreSQL; local provider,
// default lease TTL), each streamed to its end by the Go client. It asserts
// correctness (every run completed with its one line) and a generous
// memory bound; timings are only logged against the goals (runs/s, store
// p99), with the store's call latencies, the CPU per run (this process and
// the processes it reaped), the sandbox commands per run and the
// scheduler's timer lateness, so that a failure explains itself.
//
//	CORRAL_LOAD_RUNS=400 CI=true go test -run TestLoadConcurrentRuns -v ./server/
//	(CORRAL_LOAD_SQLITE_SYNC=full: the SQLite store with synchronous full;
//	CORRAL_LOAD_PG_MAXCONNS=N: the PostgreSQL pool's size;
//	CORRAL_LOAD_MAX_LOCAL_STARTS=N: run.Options.MaxLocalStarts, -1 unbounded)

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/pgstore"
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
	t.Run("sqlite", func(t *testing.T) {
		warnings := &countingHandler{}
		ctx := testCtx(t, time.Minute)
		// CORRAL_LOAD_SQLITE_SYNC=full measures sqlitestore.Options.Synchronous.
		sq, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{Logger: slog.New(warnings),
			Synchronous: os.Getenv("CORRAL_LOAD_SQLITE_SYNC")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sq.Close() })
		loadRuns(t, "SQLite", sq, warnings, runs, nil)
	})
	t.Run("postgres", func(t *testing.T) {
		pg, probe := openLoadPG(t)
		loadRuns(t, "PostgreSQL", pg, &countingHandler{}, runs, probe.start)
	})
}

// loadRuns runs the round; probe, when set, is started with the round and
// its report logged after it.
func loadRuns(t *testing.T, storeName string, sq store.Store, warnings *countingHandler, runs int,
	probe func(t *testing.T, runs int) (stop func() string)) {
	const memLimit = 2 << 30
	ctx := testCtx(t, 4*time.Minute)
	logger := slog.New(warnings)
	st := &timedStore{Store: sq}
	var execs, spawns atomic.Int64
	maxStarts, _ := strconv.Atoi(os.Getenv("CORRAL_LOAD_MAX_LOCAL_STARTS")) // 0: the default
	e := newEnv(t, envOptions{Store: st, RunOpts: run.Options{Logger: logger, MaxLocalStarts: maxStarts},
		Decorate: func(h sandbox.Handle) sandbox.Handle {
			return &countingHandle{Handle: h, execs: &execs, spawns: &spawns}
		}})
	c := e.client("")
	hwmBefore := vmHWM(t)
	selfBefore, childBefore := cpuTime()

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
	stopProbe := func() string { return "" }
	if probe != nil {
		stopProbe = probe(t, runs)
	}
	stopLateness := lateness()
	began := time.Now()
	close(ready)
	wg.Wait()
	elapsed := time.Since(began)
	late := stopLateness()
	probed := stopProbe()
	selfAfter, childAfter := cpuTime()

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
	load, _ := os.ReadFile("/proc/loadavg")
	perRun := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(runs) }
	calls, p50, p99 := st.summary(runs)
	rate := float64(runs) / elapsed.Seconds()
	t.Logf("%d concurrent runs (%s, local provider, lease TTL %s) through one daemon: %d failed; store by status %v; machine load %s",
		runs, storeName, ttl, failed, byStatus, strings.TrimSpace(string(load)))
	t.Logf("total %v, %.1f runs/s; CPU %.1f ms/run (daemon %.1f, processes it reaped %.1f); sandbox commands %.1f/run (exec %.1f, spawn %.1f)",
		elapsed.Round(time.Millisecond), rate, perRun(selfAfter-selfBefore+childAfter-childBefore), perRun(selfAfter-selfBefore), perRun(childAfter-childBefore),
		float64(execs.Load()+spawns.Load())/float64(runs), float64(execs.Load())/float64(runs), float64(spawns.Load())/float64(runs))
	t.Logf("peak RSS (VmHWM) %.1f MiB (%.1f MiB before the runs, %.2f MiB per concurrent run); worst timer lateness %v",
		float64(hwm)/(1<<20), float64(hwmBefore)/(1<<20), float64(hwm-hwmBefore)/(1<<20)/float64(runs), late.Round(time.Millisecond))
	t.Logf("store calls: p50 %v, p99 %v over all calls\n%s", p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), calls)
	if ws, ok := sq.(interface{ WriteStats() sqlitestore.WriteStats }); ok {
		w := ws.WriteStats()
		if w.Batches > 0 {
			t.Logf("SQLite writer: %d writes (%.1f/run) in %d transactions (%.1f writes each, %d rolled back whole); busy %v (%.0f%% of the wall time), %.2f ms per transaction of which COMMIT %.2f ms",
				w.Writes, float64(w.Writes)/float64(runs), w.Batches, float64(w.Writes)/float64(w.Batches), w.Aborted,
				w.Busy.Round(time.Millisecond), 100*w.Busy.Seconds()/elapsed.Seconds(),
				float64(w.Busy.Microseconds())/1000/float64(w.Batches), float64(w.Commit.Microseconds())/1000/float64(w.Batches))
		}
	}
	if ws, ok := sq.(interface{ WriteStats() pgstore.WriteStats }); ok {
		if w := ws.WriteStats(); w.Batches > 0 {
			t.Logf("PostgreSQL writer: %d writes (%.1f/run) in %d batches (%.1f writes each, %d run again alone)",
				w.Writes, float64(w.Writes)/float64(runs), w.Batches, float64(w.Writes)/float64(w.Batches), w.Alone)
		}
	}
	if probed != "" {
		t.Logf("%s", probed)
	}
	t.Logf("goals (logged, not asserted): >= 150 runs/s at 400 concurrent runs: %.1f at %d; store p99 <= 50ms: %v", rate, runs, p99.Round(10*time.Microsecond))
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
