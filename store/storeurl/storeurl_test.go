package storeurl

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		raw  string
		kind Kind
		path string
		str  string
	}{
		{"memory:", Memory, "", "memory:"},
		{"memory://", Memory, "", "memory:"},
		{"MEMORY:", Memory, "", "memory:"},
		{"sqlite:corral.db", SQLite, "corral.db", "sqlite:corral.db"},
		{"sqlite:/var/lib/corral/store.db", SQLite, "/var/lib/corral/store.db", "sqlite:/var/lib/corral/store.db"},
		{"sqlite:///var/lib/corral/store.db", SQLite, "/var/lib/corral/store.db", "sqlite:/var/lib/corral/store.db"},
		{"sqlite://rel/store.db", SQLite, "rel/store.db", "sqlite:rel/store.db"},
		{"sqlite:odd?name#x.db", SQLite, "odd?name#x.db", "sqlite:odd?name#x.db"},
		{"sqlite:///var/lib/c.db?synchronous=normal", SQLite, "/var/lib/c.db", "sqlite:///var/lib/c.db?synchronous=normal"},
		{"sqlite://c.db?synchronous=FULL", SQLite, "c.db", "sqlite://c.db?synchronous=full"},
		{"/abs/store.db", SQLite, "/abs/store.db", "sqlite:/abs/store.db"},
		{"store.db", SQLite, "store.db", "sqlite:store.db"},
		{"./x:y.db", SQLite, "./x:y.db", "sqlite:./x:y.db"},
		{"dir/x:y.db", SQLite, "dir/x:y.db", "sqlite:dir/x:y.db"},
		{"postgres://corral:corral@127.0.0.1:5432/corral_test?sslmode=disable", Postgres, "",
			"postgres://corral:xxxxx@127.0.0.1:5432/corral_test?sslmode=disable"},
		{"postgresql://u@db.example/x", Postgres, "", "postgresql://u@db.example/x"},
		{"postgres://u@h/x?password=hunter22&sslmode=disable", Postgres, "", "postgres://u@h/x?password=xxxxx&sslmode=disable"},
	} {
		got, err := Parse(c.raw)
		if err != nil {
			t.Errorf("Parse(%q): %v", c.raw, err)
			continue
		}
		if got.Kind != c.kind || got.Path != c.path || got.String() != c.str {
			t.Errorf("Parse(%q) = {%s %q} %q; want {%s %q} %q", c.raw, got.Kind, got.Path, got.String(), c.kind, c.path, c.str)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, raw := range []string{
		"", " memory:", "memory: ", "memory:x", "memory://x",
		"sqlite:", "sqlite://", "sqlite::memory:", "sqlite:file:x.db", "sqlite:///x.db?mode=ro", "sqlite://x#y",
		"sqlite://x.db?synchronous=off", "sqlite://x.db?synchronous=normal&mode=ro", "sqlite://?synchronous=normal", "sqlite://x.db?synchronous",
		"mysql://u:hunter22@h/db", "x:y.db", "file:x.db", "http://example.com/",
		"postgres://u:hunter22@h:notaport/db", "postgres://u:hunter22@h/db?sslmode=bogus",
		"postgres://u:hun/ter22@h/db", "postgres://u:hunter22%zz@h/db", "postgres:u:hunter22@h",
		"store\x00.db", "a\nb",
	} {
		_, err := Parse(raw)
		if got := sandbox.CodeOf(err); got != sandbox.InvalidArgument {
			t.Errorf("Parse(%q): %v (code %v), want InvalidArgument", raw, err, got)
			continue
		}
		for _, secret := range []string{"hunter22", "hun/ter22"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Parse(%q) error leaks the password: %v", raw, err)
			}
		}
	}
}

func TestOpenMemoryAndSQLite(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	for _, raw := range []string{"memory:", "sqlite:" + filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")} {
		s, err := Open(ctx, raw, Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		in := store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t"}
		if err := s.PutInstance(ctx, in); err != nil {
			t.Fatalf("%s: PutInstance: %v", raw, err)
		}
		if _, ok, err := s.GetInstance(ctx, "k"); !ok || err != nil {
			t.Fatalf("%s: GetInstance = %v, %v", raw, ok, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("%s: Close: %v", raw, err)
		}
	}
	for _, name := range []string{"a.db", "b.db"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s was not created: %v", name, err)
		}
	}
	_, err := Open(ctx, "bogus://x", Options{})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("Open(bogus://x) = %v", err)
	}
}

func TestOpenPostgres(t *testing.T) {
	url := os.Getenv("CORRAL_TEST_POSTGRES_URL")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CORRAL_TEST_POSTGRES_URL is not set")
		}
		t.Skip("CORRAL_TEST_POSTGRES_URL is not set")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "corral_storeurl_" + hex.EncodeToString(rnd[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, url); err == nil {
			_, _ = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
			conn.Close(ctx)
		}
	})
	s, err := Open(t.Context(), url, Options{PostgresSchema: schema})
	if err != nil {
		if os.Getenv("CI") != "true" && sandbox.CodeOf(err) == sandbox.Unavailable {
			t.Skipf("PostgreSQL unreachable: %v", err)
		}
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if _, _, err := s.GetInstance(t.Context(), "k"); err != nil {
		t.Fatalf("GetInstance: %v", err)
	}
}

// TestOpenPostgresUnreachable: the error names the server, never the
// password.
func TestOpenPostgresUnreachable(t *testing.T) {
	raw := "postgres://corral:hunter22@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"
	_, err := Open(t.Context(), raw, Options{})
	if sandbox.CodeOf(err) != sandbox.Unavailable {
		t.Fatalf("Open(unreachable) = %v, want Unavailable", err)
	}
	if strings.Contains(err.Error(), "hunter22") {
		t.Fatalf("the error leaks the password: %v", err)
	}
}
