package ensure_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// yielding widens the windows between a read and a write of an instance
// record: it yields the processor around every call, so an unlocked
// read-modify-write interleaves with a concurrent writer often.
type yielding struct{ *memstore.Store }

func yieldSome() {
	for range 8 {
		runtime.Gosched()
	}
}

func (y yielding) GetInstance(ctx context.Context, key string) (store.Instance, bool, error) {
	yieldSome()
	defer yieldSome()
	return y.Store.GetInstance(ctx, key)
}

func (y yielding) PutInstance(ctx context.Context, in store.Instance) error {
	yieldSome()
	defer yieldSome()
	return y.Store.PutInstance(ctx, in)
}

func (y yielding) DeleteInstance(ctx context.Context, key string) error {
	yieldSome()
	defer yieldSome()
	return y.Store.DeleteInstance(ctx, key)
}

// snapshotsOnDisk lists the snapshots the fake provider holds.
func snapshotsOnDisk(t *testing.T, p *counting) []string {
	t.Helper()
	ents, err := os.ReadDir(p.snapDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// together runs a and b at once, released by one channel close.
func together(a, b func()) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for _, f := range []func(){a, b} {
		wg.Go(func() { <-gate; f() })
	}
	close(gate)
	wg.Wait()
}

// TestSnapshotAfterRunRacesEnsureAndDestroy races the after-run snapshot
// bookkeeping against an ensure and against a destroy of the same key. The
// record must never lose the other writer's change, never be resurrected
// after a destroy, and never name a deleted snapshot; no snapshot is left
// that no record names.
func TestSnapshotAfterRunRacesEnsureAndDestroy(t *testing.T) {
	const iterations = 150
	cases := []struct {
		name  string
		other string
	}{
		{"ensure", "ensure"},
		{"destroy", "destroy"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			m := &ensure.Manager{Instances: yielding{st}, Locker: st}
			p := newCounting(t, true)
			def := &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotAfterRun}}
			var taken, skipped, lost, resurrected, dangling, orphans int
			var first string
			firstBad := func(format string, args ...any) {
				if first == "" {
					first = fmt.Sprintf(format, args...)
				}
			}
			for i := range iterations {
				runA, runB := "a"+strconv.Itoa(i), "b"+strconv.Itoa(i)
				ens, err := m.Ensure(ctx, def, ensure.Request{Thread: "t", Run: runA})
				if err != nil {
					t.Fatalf("iteration %d: ensure: %v", i, err)
				}
				var sarOK bool
				var sarErr, otherErr error
				sar := func() {
					_, sarOK, sarErr = m.SnapshotAfterRun(ctx, def, ensure.Request{Thread: "t", Run: runA}, ens.Handle)
				}
				other := func() {
					if tc.other == "ensure" {
						_, otherErr = m.Ensure(ctx, def, ensure.Request{Thread: "t", Run: runB})
					} else {
						otherErr = m.Destroy(ctx, def, ensure.Request{Thread: "t", Run: runB})
					}
				}
				together(sar, other)
				if otherErr != nil {
					t.Fatalf("iteration %d: %s: %v", i, tc.other, otherErr)
				}
				if sarErr != nil {
					t.Fatalf("iteration %d: snapshot after run: %v", i, sarErr)
				}
				if sarOK {
					taken++
				} else {
					skipped++
				}
				rec, found, err := st.GetInstance(ctx, ens.Key)
				if err != nil {
					t.Fatal(err)
				}
				disk := snapshotsOnDisk(t, p)
				switch tc.other {
				case "ensure":
					if !found || rec.LatestRunID != runB || rec.ProviderSandboxID != ens.Handle.ID() {
						lost++
						firstBad("iteration %d: the ensure's write was lost: found=%v %+v", i, found, rec)
					}
					if found && rec.LatestSnapshotID != "" {
						if _, err := os.Stat(rec.LatestSnapshotID); err != nil {
							dangling++
							firstBad("iteration %d: the record names a deleted snapshot %s", i, rec.LatestSnapshotID)
						}
					}
					if want := 1; len(disk) != want {
						orphans += len(disk) - want
						firstBad("iteration %d: %d snapshots on disk, want %d: %v", i, len(disk), want, disk)
					}
				case "destroy":
					if found {
						resurrected++
						firstBad("iteration %d: the record outlived its destroy: %+v", i, rec)
					}
					if len(disk) != 0 {
						orphans += len(disk)
						firstBad("iteration %d: %d snapshots left after the destroy: %v", i, len(disk), disk)
					}
				}
				// Clear the orphans so each iteration counts only its own.
				for _, name := range disk {
					if path := filepath.Join(p.snapDir, name); !found || path != rec.LatestSnapshotID {
						os.RemoveAll(path)
					}
				}
			}
			t.Logf("%d iterations: %d snapshots recorded, %d skipped (the %s went first: nothing to snapshot); %d ensure writes lost, %d records resurrected, %d records naming a deleted snapshot, %d orphan snapshots",
				iterations, taken, skipped, tc.other, lost, resurrected, dangling, orphans)
			if lost+resurrected+dangling+orphans > 0 {
				t.Errorf("the record or its snapshots went wrong; the first case: %s", first)
			}
		})
	}
}

// TestSnapshotAfterRunSkips: no after-run mode, or a record that names
// another sandbox, means no snapshot is taken.
func TestSnapshotAfterRunSkips(t *testing.T) {
	ctx := t.Context()
	m, st := newManager(t)
	p := newCounting(t, true)
	def := &sandbox.Definition{ID: "d", Provider: p, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone}}
	r, err := m.Ensure(ctx, def, ensure.Request{Thread: "t", Run: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.SnapshotAfterRun(ctx, def, ensure.Request{Thread: "t", Run: "r1"}, r.Handle); ok || err != nil {
		t.Fatalf("mode none: ok=%v err=%v", ok, err)
	}
	def.Lifecycle.Snapshot = sandbox.SnapshotAfterRun
	rec, _, _ := st.GetInstance(ctx, r.Key)
	rec.ProviderSandboxID = "someone-else"
	if err := st.PutInstance(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.SnapshotAfterRun(ctx, def, ensure.Request{Thread: "t", Run: "r1"}, r.Handle); ok || err != nil {
		t.Fatalf("record of another sandbox: ok=%v err=%v", ok, err)
	}
	if disk := snapshotsOnDisk(t, p); len(disk) != 0 {
		t.Errorf("snapshots taken: %v", disk)
	}
}
