package runtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// EmbeddedStores returns the stores that need no server, by name: memory,
// and SQLite in a file of the case's temporary directory. Each call of a
// value opens a fresh, empty store, closed when its test ends.
func EmbeddedStores() map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(t *testing.T) store.Store {
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			return st
		},
		"sqlite": func(t *testing.T) store.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// RunEach runs the suite against p once per store, each as a parallel
// subtest named after its store. Call it last in its test.
func RunEach(t *testing.T, p sandbox.Provider, stores map[string]func(t *testing.T) store.Store) {
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			Run(t, Harness{Provider: p, Store: open})
		})
	}
}
