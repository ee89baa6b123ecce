package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
	"github.com/d10ffeed/corral/store/storetest"
)

func TestMain(m *testing.M) {
	if os.Getenv(envCrashChild) != "" {
		os.Exit(crashChild())
	}
	storetest.Main(m, func(ctx context.Context, spec string) (store.Store, error) {
		return sqlitestore.Open(ctx, spec, sqlitestore.Options{})
	})
}

func open(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Backend {
			path := filepath.Join(t.TempDir(), "corral.db")
			return storetest.Backend{
				Store:     open(t, path),
				Reopen:    func(t *testing.T) store.Store { return open(t, path) },
				ChildSpec: path,
			}
		},
		NewWithClock: func(t *testing.T, now func() time.Time) storetest.Backend {
			path := filepath.Join(t.TempDir(), "corral.db")
			o := func(t *testing.T) *sqlitestore.Store {
				s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{Now: now})
				if err != nil {
					t.Fatalf("Open %s: %v", path, err)
				}
				return s
			}
			return storetest.Backend{Store: o(t), Reopen: func(t *testing.T) store.Store { return o(t) }, ChildSpec: path}
		},
	})
}

// TestConcurrentOpen: several stores opening one new file at once all
// succeed, and each migration is recorded once.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.db")
	const n = 6
	stores := make([]*sqlitestore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
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
	// Reopening is a no-op for the schema.
	s := open(t, path)
	defer s.Close()
	if v, _ := s.SchemaVersion(t.Context()); v != want {
		t.Fatalf("SchemaVersion after reopen = %d", v)
	}
}

func TestOpenErrors(t *testing.T) {
	for _, path := range []string{"", ":memory:", "file:x.db", "a\x00b"} {
		_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("Open(%q) = %v, want InvalidArgument", path, err)
		}
	}
	_, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "no", "such", "dir", "x.db"), sqlitestore.Options{})
	if err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
	if c := sandbox.CodeOf(err); c != sandbox.Unavailable {
		t.Errorf("Open in a missing directory: code %v (%v), want Unavailable", c, err)
	}
}

// TestOddPath: a path with URI-special characters is a plain file name.
func TestOddPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a b?c#d%41&e.db")
	s := open(t, path)
	defer s.Close()
	if err := s.PutInstance(t.Context(), store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("database file not at its literal path (%v); directory holds %q", err, names)
	}
}

func TestClosed(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, _, err := s.GetInstance(t.Context(), "k")
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Fatalf("GetInstance after Close: %v, want FailedPrecondition", err)
	}
}

// migrationCount is the number of embedded migrations: the schema version
// of a fresh database.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations: %v", err)
	}
	return len(files)
}

// TestLogSizeMigration: a database at schema version 1 that holds events
// gets each run's log size from migration 3 (log_bytes).
func TestLogSizeMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	v1, err := os.ReadFile(filepath.Join("migrations", "0001_init.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{string(v1),
		`CREATE TABLE corral_schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`INSERT INTO corral_schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO corral_runs (id, thread_id, status, created_at, updated_at, last_seq) VALUES ('r', 't', 'running', 0, 0, 3), ('e', 't', 'running', 0, 0, 0)`,
		`INSERT INTO corral_run_events (run_id, seq, type, data, time) VALUES ('r', 1, 'a', CAST('{"a":1}' AS BLOB), 0), ('r', 2, 'b', NULL, 0), ('r', 3, 'c', CAST('"hello"' AS BLOB), 0)`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s := open(t, path)
	defer s.Close()
	if v, _ := s.SchemaVersion(t.Context()); v != migrationCount(t) {
		t.Fatalf("SchemaVersion = %d, want %d", v, migrationCount(t))
	}
	for id, want := range map[string]int64{"r": 7 + 7, "e": 0} {
		if n, err := s.LogSize(t.Context(), id); err != nil || n != want {
			t.Errorf("LogSize(%s) = %d, %v; want %d", id, n, err, want)
		}
	}
}

// TestSynchronous: Options.Synchronous sets PRAGMA synchronous on every
// connection (NORMAL by default); an unknown value is refused.
func TestSynchronous(t *testing.T) {
	for _, tc := range []struct {
		opt  string
		want int
	}{{"", 1}, {"full", 2}, {"FULL", 2}, {"normal", 1}} {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{Synchronous: tc.opt})
		if err != nil {
			t.Fatal(err)
		}
		w, r, err := sqlitestore.SynchronousModes(t.Context(), s)
		s.Close()
		if err != nil || w != tc.want || r != tc.want {
			t.Errorf("Synchronous %q: writer %d, reader %d, %v; want %d", tc.opt, w, r, err, tc.want)
		}
	}
	if _, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{Synchronous: "off"}); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "want full or normal") {
		t.Errorf("synchronous off: %v", err)
	}
}
