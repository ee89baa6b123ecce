package run_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// TestStartReturnsTheStoredRecord: the record Start returns is the one
// the store holds, at driver epoch 1 with the run's lease held, for a
// fresh id and a caller's, on every store.
func TestStartReturnsTheStoredRecord(t *testing.T) {
	for _, name := range []string{"memory", "sqlite", "postgres"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			if name == "sqlite" {
				st, err := sqlitestore.Open(t.Context(), t.TempDir()+"/corral.db", sqlitestore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				e.st = st
			}
			if name == "postgres" {
				e.st = pgtest.Open(t)
			}
			r := e.runner(t, run.Options{})
			c := ctx(t)
			for _, id := range []string{"", "run-of-mine"} {
				rec, err := r.Start(c, run.StartRequest{ID: id, Definition: "d", Thread: "t-" + id, Harness: command.Name,
					Args: []string{"sleep", "60"}, Retention: store.RetainAll})
				if err != nil {
					t.Fatal(err)
				}
				got, ok, err := e.st.GetRun(c, rec.ID)
				if err != nil || !ok {
					t.Fatalf("GetRun %s: %v %v", rec.ID, ok, err)
				}
				if d := cmp.Diff(got, rec); d != "" {
					t.Errorf("id %q: Start returned a record the store does not hold (-stored +returned):\n%s", id, d)
				}
				if rec.DriverEpoch != 1 {
					t.Errorf("id %q: driver epoch %d, want 1", id, rec.DriverEpoch)
				}
				if _, held, err := e.st.TryLock(c, "run-driver:"+rec.ID, time.Second); err != nil || held {
					t.Errorf("id %q: the run's lease is free (TryLock got it: %v, %v)", id, held, err)
				}
				if _, err := r.Cancel(c, rec.ID); err != nil {
					t.Fatal(err)
				}
				_ = r.Wait(c, rec.ID)
			}
		})
	}
}
