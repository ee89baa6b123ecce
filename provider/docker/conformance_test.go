package docker_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// suitePort is the container port the conformance suite listens on; the
// provider publishes it on 127.0.0.1.
const suitePort = 8080

func TestConformance(t *testing.T) {
	p := newProvider(t, docker.Options{Ports: []int{suitePort}})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p, Port: suitePort})
}

// TestJournalConformance runs the run journal's suite in containers.
func TestJournalConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Harness{Provider: newProvider(t, docker.Options{})})
}

// TestRunConformance runs the takeover and reaper suites in containers,
// over the memory and SQLite stores (PostgreSQL runs them on the local
// provider).
func TestRunConformance(t *testing.T) {
	p := newProvider(t, docker.Options{})
	for name, open := range map[string]func(t *testing.T) store.Store{
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
	} {
		t.Run(name, func(t *testing.T) { runtest.Run(t, runtest.Harness{Provider: p, Store: open}) })
	}
}
