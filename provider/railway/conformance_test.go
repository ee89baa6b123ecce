package railway_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// TestConformance runs the provider suite against the fake, over the
// guard as the registry hands providers out (killableProcesses measured
// by KillMeasured).
func TestConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), railway.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the journal suite against the fake. The
// flood is 16 MiB (four times execproc's 4 MiB of unread output per
// stream) rather than 64: each strategy's flood crosses the exec socket,
// and 64 MiB three times took 49 s of this package's time under -race.
func TestJournalConformance(t *testing.T) {
	t.Parallel() // wait-bound (the suite's graces and deadlines): beside the run suite
	p, _ := newProvider(t, newFake(t), railway.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the memory
// and SQLite stores.
func TestRunConformance(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, newFake(t), railway.Options{})
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
