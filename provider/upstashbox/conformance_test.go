package upstashbox_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// TestConformance runs the provider suite against the Upstash Box fake, whose
// session kills on disconnect: killableProcesses rests on the provider's
// group kill, measured by KillMeasured. It and TestConformanceGuarded
// (each with a fake of its own) run in parallel with each other.
func TestConformance(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p})
}

// TestConformanceGuarded runs the provider suite over sandbox.Guard, as
// the registry hands providers out.
func TestConformanceGuarded(t *testing.T) {
	t.Parallel()
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
}

// TestJournalConformance runs the journal suite against the fake. The
// flood is 16 MiB (as cloudflare's): under -race the journal reader's
// per-line work, not the wire, is most of its cost.
func TestJournalConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
	journaltest.Run(t, journaltest.Harness{Provider: p, FloodBytes: 16 << 20})
}

// TestRunConformance runs the takeover and reaper suites over the
// memory and SQLite stores (the durable run fields included), the two in
// parallel (each suite's runs and boxes are its own; most of a case is
// waiting, LeavesStartingRunAlone's 15 s first-byte deadline above all).
func TestRunConformance(t *testing.T) {
	p, _ := newProvider(t, newFake(t), upstashbox.Options{})
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
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runtest.Run(t, runtest.Harness{Provider: p, Store: open})
		})
	}
}
