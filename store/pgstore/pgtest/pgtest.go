// Package pgtest gives tests a fresh PostgreSQL store: the database named
// by CORRAL_TEST_POSTGRES_URL (scripts/setup-postgres.sh starts one), a new
// schema per test, dropped when the test ends. Without the database a test
// skips naming the reason, or fails under CI=true.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/store/internal/redact"
	"github.com/d10ffeed/corral/store/pgstore"
)

// URLEnv names the variable holding the test database's URL.
const URLEnv = "CORRAL_TEST_POSTGRES_URL"

var (
	reachOnce sync.Once
	reachErr  error
)

// URL returns the test database's URL. Unset or unreachable, the test
// skips naming the reason, or fails under CI=true.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(URLEnv)
	if url == "" {
		skipOrFail(t, URLEnv+" is not set (scripts/setup-postgres.sh starts a local server)")
	}
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var conn *pgx.Conn
		conn, reachErr = pgx.Connect(ctx, url)
		if reachErr == nil {
			reachErr = conn.Ping(ctx)
			conn.Close(ctx)
		}
	})
	if reachErr != nil {
		skipOrFail(t, "the PostgreSQL of "+URLEnv+" ("+redact.URL(url)+") is unreachable: "+
			redact.Message(reachErr.Error(), redact.Secrets(url)))
	}
	return url
}

func skipOrFail(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(reason)
	}
	t.Skip(reason)
}

// FreshSchema returns a new schema name, dropped when the test ends.
func FreshSchema(t testing.TB, url string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "corral_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// Open returns a store in a fresh schema of the test database, closed when
// the test ends.
func Open(t testing.TB) *pgstore.Store {
	t.Helper()
	url := URL(t)
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: FreshSchema(t, url)})
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
