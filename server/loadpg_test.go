package server_test

// What the load test measures on PostgreSQL besides the store calls: the
// statements (round trips) the store sends per run, by kind, and the CPU
// of the PostgreSQL backends serving this store (their /proc/<pid>/stat
// utime+stime) and of the whole server (every postgres process, other
// clients of a shared server included).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/d10ffeed/corral/store/pgstore"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
)

// stmtCounter counts the statements a store sends, by their first words
// (a batch, one round trip, by its first statement), and measures the
// waits for a connection of the pool.
type stmtCounter struct {
	mu       sync.Mutex
	counts   map[string]int
	acquires []time.Duration
}

// TraceQueryStart implements pgx.QueryTracer.
func (c *stmtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}

// TraceBatchStart implements pgx.BatchTracer.
func (c *stmtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if qs := d.Batch.QueuedQueries; len(qs) > 0 {
		c.count(fmt.Sprintf("batch of %d: %s", len(qs), qs[0].SQL))
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *stmtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *stmtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

type acquireStart struct{}

// TraceAcquireStart implements pgxpool.AcquireTracer.
func (c *stmtCounter) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	return context.WithValue(ctx, acquireStart{}, time.Now())
}

// TraceAcquireEnd implements pgxpool.AcquireTracer.
func (c *stmtCounter) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if began, ok := ctx.Value(acquireStart{}).(time.Time); ok {
		d := time.Since(began)
		c.mu.Lock()
		c.acquires = append(c.acquires, d)
		c.mu.Unlock()
	}
}

func (c *stmtCounter) count(sql string) {
	k := strings.Join(strings.Fields(sql), " ")
	if len(k) > 70 {
		k = k[:70]
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[k]++
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *stmtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *stmtCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// report returns the statements sent since before, per run, most first.
func (c *stmtCounter) report(before map[string]int, runs int) string {
	now := c.snapshot()
	type kv struct {
		k string
		n int
	}
	var all []kv
	total := 0
	for k, n := range now {
		if d := n - before[k]; d > 0 {
			all = append(all, kv{k, d})
			total += d
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].k < all[j].k })
	c.mu.Lock()
	acq := slices.Clone(c.acquires)
	c.mu.Unlock()
	slices.Sort(acq)
	var b strings.Builder
	if len(acq) > 0 {
		fmt.Fprintf(&b, "waits for a pool connection: p50 %v, p99 %v, max %v over %d acquisitions\n",
			quantile(acq, .5).Round(10*time.Microsecond), quantile(acq, .99).Round(10*time.Microsecond), acq[len(acq)-1].Round(time.Millisecond), len(acq))
	}
	fmt.Fprintf(&b, "%d round trips (statements and batches), %.1f/run:\n", total, float64(total)/float64(runs))
	for _, e := range all {
		fmt.Fprintf(&b, "  %5.2f/run  %s\n", float64(e.n)/float64(runs), e.k)
	}
	return b.String()
}

// procTicks returns utime+stime of a process, in clock ticks.
func procTicks(pid int) (int64, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command may hold spaces
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)  // field 14, utime
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15, stime
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + st, true
}

// postgresPIDs returns every process named postgres.
func postgresPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(comm)) == "postgres" {
			out = append(out, pid)
		}
	}
	return out
}

// pgProbe measures one PostgreSQL load round.
type pgProbe struct {
	url, app string
	stmts    *stmtCounter
}

// backendPIDs returns the backends of connections named p.app.
func (p *pgProbe) backendPIDs(ctx context.Context) ([]int, error) {
	conn, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, p.app)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

func ticksOf(pids []int) map[int]int64 {
	m := map[int]int64{}
	for _, pid := range pids {
		if t, ok := procTicks(pid); ok {
			m[pid] = t
		}
	}
	return m
}

// start takes the first readings and returns what reports the round.
func (p *pgProbe) start(t *testing.T, runs int) (stop func() string) {
	t.Helper()
	ctx := context.Background()
	bpids, err := p.backendPIDs(ctx)
	if err != nil {
		t.Fatalf("reading pg_stat_activity: %v", err)
	}
	backends, server := ticksOf(bpids), ticksOf(postgresPIDs())
	stmts := p.stmts.snapshot()
	p.stmts.mu.Lock()
	p.stmts.acquires = nil
	p.stmts.mu.Unlock()
	began := time.Now()
	return func() string {
		elapsed := time.Since(began)
		bpids, err := p.backendPIDs(ctx)
		if err != nil {
			return fmt.Sprintf("reading pg_stat_activity: %v", err)
		}
		delta := func(before map[int]int64, pids []int) (ticks int64) {
			for pid, after := range ticksOf(pids) {
				ticks += after - before[pid]
			}
			return ticks
		}
		const hz = 100 // USER_HZ on Linux
		perRun := func(ticks int64) float64 { return float64(ticks) * 1000 / hz / float64(runs) }
		b, s := delta(backends, bpids), delta(server, postgresPIDs())
		return fmt.Sprintf("PostgreSQL CPU %.1f ms/run in this store's %d backends (%.0f%% of one core over the round); %.1f ms/run in every postgres process (other clients of the server included)\n%s",
			perRun(b), len(bpids), 100*float64(b)/hz/elapsed.Seconds(), perRun(s), p.stmts.report(stmts, runs))
	}
}

// openLoadPG opens a PostgreSQL store in a fresh schema whose connections
// carry an application name of their own, with its statements counted.
func openLoadPG(t *testing.T) (*pgstore.Store, *pgProbe) {
	t.Helper()
	url := pgtest.URL(t)
	schema := pgtest.FreshSchema(t, url)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	p := &pgProbe{url: url, app: "corral-load-" + schema, stmts: &stmtCounter{}}
	opts := pgstore.Options{Schema: schema, Tracer: p.stmts}
	if v, err := strconv.Atoi(os.Getenv("CORRAL_LOAD_PG_MAXCONNS")); err == nil && v > 0 {
		opts.MaxConns = int32(v) // measures pool sizes
	}
	s, err := pgstore.Open(context.Background(), url+sep+"application_name="+p.app, opts)
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, p
}
