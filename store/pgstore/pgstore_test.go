package pgstore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/pgstore"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
	"github.com/d10ffeed/corral/store/storetest"
)

// childSpec is what a cross-process child needs to reach a test's schema.
type childSpec struct {
	URL    string `json:"url"`
	Schema string `json:"schema"`
}

func TestMain(m *testing.M) {
	storetest.Main(m, func(ctx context.Context, spec string) (store.Store, error) {
		var cs childSpec
		if err := json.Unmarshal([]byte(spec), &cs); err != nil {
			return nil, err
		}
		return pgstore.Open(ctx, cs.URL, pgstore.Options{Schema: cs.Schema})
	})
}

func testURL(t *testing.T) string { t.Helper(); return pgtest.URL(t) }

func freshSchema(t *testing.T, url string) string { t.Helper(); return pgtest.FreshSchema(t, url) }

func open(t *testing.T, url, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(t.Context(), url, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	url := testURL(t)
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Backend {
			schema := freshSchema(t, url)
			spec, _ := json.Marshal(childSpec{URL: url, Schema: schema})
			return storetest.Backend{
				Store:     open(t, url, schema),
				Reopen:    func(t *testing.T) store.Store { return open(t, url, schema) },
				ChildSpec: string(spec),
			}
		},
		NewWithClock: func(t *testing.T, now func() time.Time) storetest.Backend {
			schema := freshSchema(t, url)
			o := func(t *testing.T) store.Store {
				s, err := pgstore.Open(t.Context(), url, pgstore.Options{Schema: schema, Now: now})
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s
			}
			return storetest.Backend{Store: o(t), Reopen: o}
		},
	})
}

// TestConcurrentMigrations: processes starting at once on a new schema all
// open it, and each migration is recorded once.
func TestConcurrentMigrations(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	const n = 6
	stores := make([]*pgstore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = pgstore.Open(t.Context(), url, pgstore.Options{Schema: schema})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	want := migrationCount(t)
	v, err := stores[0].SchemaVersion(t.Context())
	if err != nil || v != want {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, want)
	}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var rows int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+pgx.Identifier{schema, "corral_schema_migrations"}.Sanitize()).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != want {
		t.Fatalf("corral_schema_migrations has %d rows, want %d", rows, want)
	}
}

// TestSchemasIsolated: two schemas in one database do not see each other.
func TestSchemasIsolated(t *testing.T) {
	url := testURL(t)
	a := open(t, url, freshSchema(t, url))
	defer a.Close()
	b := open(t, url, freshSchema(t, url))
	defer b.Close()
	ctx := t.Context()
	if err := a.PutInstance(ctx, store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := b.GetInstance(ctx, "k"); ok || err != nil {
		t.Fatalf("schema b sees schema a's record: %v, %v", ok, err)
	}
}

// TestOpenErrors: bad URLs are InvalidArgument, an unreachable server is
// Unavailable, and the password is in neither message.
func TestOpenErrors(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		url  string
		want sandbox.Code
	}{
		{"postgres://corral:" + secret + "@127.0.0.1:notaport/db", sandbox.InvalidArgument},
		{"postgres://corral:" + secret + "@127.0.0.1:5432/db?sslmode=bogus", sandbox.InvalidArgument},
		{"postgres://corral:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2", sandbox.Unavailable},
		{"postgres://corral@127.0.0.1:1/db?sslmode=disable&connect_timeout=2&password=" + secret, sandbox.Unavailable},
	} {
		_, err := pgstore.Open(ctx, c.url, pgstore.Options{})
		if got := sandbox.CodeOf(err); got != c.want {
			t.Errorf("Open(%s): code %v (%v), want %v", strings.ReplaceAll(c.url, secret, "***"), got, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("the error of Open leaks the password: %v", err)
		}
	}
}

// TestWrongPassword: an authentication failure is not a password leak.
func TestWrongPassword(t *testing.T) {
	url := testURL(t)
	bad := strings.Replace(url, ":corral@", ":wrong-"+"password-xyz@", 1)
	if bad == url {
		t.Skip("the test URL has no password corral to replace")
	}
	_, err := pgstore.Open(t.Context(), bad, pgstore.Options{})
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	if strings.Contains(err.Error(), "wrong-password-xyz") {
		t.Fatalf("the error leaks the password: %v", err)
	}
	if c := sandbox.CodeOf(err); c != sandbox.Unavailable && c != sandbox.PermissionDenied {
		t.Errorf("code %v (%v), want Unavailable or PermissionDenied", c, err)
	}
}

// migrationCount is the number of embedded migrations: the schema version
// of a fresh schema.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	return len(files)
}

// TestPoolOutlastsSlowWriters: eight updates waiting on a row lock (their
// batch gives up on the lock after the writer's lock_timeout, and each
// waits alone, on a connection of its own) do not take every connection of
// a store opened with the defaults: a read of another run still gets one
// while they wait. (pgxpool's own default on this 2-core machine was 4
// connections: the read waited for the lock.)
func TestPoolOutlastsSlowWriters(t *testing.T) {
	ctx := t.Context()
	url := pgtest.URL(t)
	schema := pgtest.FreshSchema(t, url)
	s, err := pgstore.Open(ctx, url, pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{"locked", "other"} {
		if err := s.CreateRun(ctx, store.Run{ID: id, ThreadID: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+pgx.Identifier{schema, "corral_runs"}.Sanitize()+` WHERE id = 'locked' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = s.UpdateRun(ctx, "locked", store.RunPatch{Error: store.Set("x")})
		}()
	}
	watcher, err := pgx.Connect(ctx, url) // outside the transaction, whose view of the statistics is one snapshot
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(context.Background())
	waiting := func() int {
		var n int
		_ = watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
		return n
	}
	deadline := time.Now().Add(time.Minute)
	for waiting() < 4 { // all that a pool of 4 could send
		if time.Now().After(deadline) {
			t.Fatal("the updates never waited on the row lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard: without a free connection it waits for the lock
	_, found, err := s.GetRun(rctx, "other")
	cancel()
	n := waiting()
	_ = tx.Rollback(ctx)
	wg.Wait()
	if err != nil || !found {
		t.Fatalf("reading another run while %d updates waited on a row lock: found=%v %v", n, found, err)
	}
	t.Logf("read another run while %d of %d updates waited on a row lock (pool cap %d)", n, writers, pgstore.DefaultMaxConns)
}
