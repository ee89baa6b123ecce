package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// testCkForkRacesCreateRun races forks into fresh threads with the
// creation of a run on each, over two handles. Each fork either publishes
// (the run came after it) or is refused because the destination has the
// run; nothing else fails, and a published fork is its thread's head. (A
// store whose check could miss an uncommitted run is caught
// deterministically by the PostgreSQL store's TestForkRacesCreateRun,
// which holds the run's transaction open.)
func testCkForkRacesCreateRun(t *testing.T, h Harness) {
	b := h.open(t)
	s1, s2 := b.Store, b.second(t)
	const src, n = "thread-fork-race-src", 12
	ws := acquire(t, s1, "", src, time.Minute)
	appendCk(t, s1, ckpt(src, "c1", "", t0), "", ws)
	leases := make([]store.WriterLease, n)
	for i := range n {
		leases[i] = acquire(t, s1, "", fmt.Sprintf("thread-fork-race-%02d", i), time.Minute)
	}
	forkErrs, runErrs := make([]error, n), make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		dst := fmt.Sprintf("thread-fork-race-%02d", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, forkErrs[i] = s1.ForkCheckpoint(t.Context(), "", src, "c1", dst, "root", t0, leases[i])
		}()
		go func() {
			defer wg.Done()
			<-start
			runErrs[i] = s2.CreateRun(t.Context(), store.Run{ID: "run-" + dst, ThreadID: dst, CreatedAt: t0})
		}()
	}
	close(start)
	wg.Wait()
	for i := range n {
		dst := fmt.Sprintf("thread-fork-race-%02d", i)
		must(t, runErrs[i], "CreateRun "+dst)
		switch err := forkErrs[i]; {
		case err == nil:
			wantHead(t, s1, "", dst, "root")
		case sandbox.CodeOf(err) == sandbox.FailedPrecondition && errors.Is(err, store.ErrForkDestinationNotEmpty):
			wantIDs(t, s1, "", dst)
		default:
			t.Fatalf("fork into %s: %v", dst, err)
		}
	}
}
