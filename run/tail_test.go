package run_test

import (
	"context"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// readCounter counts the log reads a follower makes.
type readCounter struct {
	store.Store
	reads, closedChecks, getRuns atomic.Int64
}

func (s *readCounter) ReadEvents(ctx context.Context, id string, after int64, limit int) ([]store.Event, error) {
	s.reads.Add(1)
	return s.Store.ReadEvents(ctx, id, after, limit)
}

func (s *readCounter) LogClosed(ctx context.Context, id string) (bool, error) {
	s.closedChecks.Add(1)
	return s.Store.LogClosed(ctx, id)
}

func (s *readCounter) GetRun(ctx context.Context, id string) (store.Run, bool, error) {
	s.getRuns.Add(1)
	return s.Store.GetRun(ctx, id)
}

// TestFollowFromTheTail: a follower in the driver's process is served from
// the driver's in-memory tail; what it gets is what the store holds, byte
// for byte and to the millisecond, for a follower that keeps up, one that
// starts late (behind the tail's bound of events: the store serves the
// start) and one that starts after the end.
func TestFollowFromTheTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"memstore", func(t *testing.T) store.Store {
			s := memstore.New(memstore.Options{})
			t.Cleanup(func() { s.Close() })
			return s
		}},
		{"sqlite", func(t *testing.T) store.Store {
			s, err := sqlitestore.Open(ctx(t), filepath.Join(t.TempDir(), "c.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}},
		{"postgres", func(t *testing.T) store.Store { return pgtest.Open(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			st := &readCounter{Store: tc.open(t)}
			r, err := run.New(st, []*sandbox.Definition{e.def}, []harness.Harness{command.Harness{}}, run.Options{LeaseTTL: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			c := ctx(t)
			// 600 lines: more events than the tail keeps (256).
			rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: command.Name,
				Args: []string{"sh", "-c", "i=0; while [ $i -lt 600 ]; do echo line $i; i=$((i+1)); done"}})
			if err != nil {
				t.Fatal(err)
			}
			follow := func(after int64) []store.Event {
				var got []store.Event
				if err := r.Follow(c, rec.ID, after, func(e store.Event) error {
					got = append(got, e)
					return nil
				}); err != nil {
					t.Errorf("follow after %d: %v", after, err)
				}
				return got
			}
			var wg sync.WaitGroup
			var early []store.Event
			wg.Add(1)
			go func() { defer wg.Done(); early = follow(0) }()
			// The late follower starts once the run is past the tail's bound.
			testutil.WaitFor(t, c, "300 events stored", 5*time.Millisecond, func(ctx context.Context) (bool, error) {
				last, err := st.LastSeq(ctx, rec.ID)
				return last > 300, err
			})
			late := follow(2)
			wg.Wait()
			if err := r.Wait(c, rec.ID); err != nil {
				t.Fatal(err)
			}
			after := follow(0)
			want, err := st.Store.ReadEvents(c, rec.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(want); n < 600 || want[n-1].Type != string(event.RunFinished) {
				t.Fatalf("the stored log has %d events, ending %q", n, want[len(want)-1].Type)
			}
			for _, f := range []struct {
				name string
				got  []store.Event
				want []store.Event
			}{{"early", early, want}, {"late", late, want[2:]}, {"after the end", after, want}} {
				if !reflect.DeepEqual(f.got, f.want) {
					t.Errorf("%s follower: %d events differ from the store's %d", f.name, len(f.got), len(f.want))
					for i := range min(len(f.got), len(f.want)) {
						if !reflect.DeepEqual(f.got[i], f.want[i]) {
							t.Errorf("first difference at %d: got %+v, want %+v", i, f.got[i], f.want[i])
							break
						}
					}
				}
			}
			t.Logf("log reads by three followers of a %d-event run: ReadEvents %d, LogClosed %d", len(want), st.reads.Load(), st.closedChecks.Load())
		})
	}
}
