package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RunBlobSweep checks the blob sweep's generation and how it fences
// AppendCheckpoint (store.BlobSweep), and ListCheckpointThreads.
func RunBlobSweep(t *testing.T, h Harness) {
	t.Run("Generations", func(t *testing.T) { testSweepGenerations(t, h) })
	t.Run("FencesAppend", func(t *testing.T) { testSweepFencesAppend(t, h) })
	t.Run("ExpiredSweep", func(t *testing.T) { testSweepExpired(t, h) })
	t.Run("RacingAppends", func(t *testing.T) { testSweepRacing(t, h) })
	t.Run("CheckpointThreads", func(t *testing.T) { testCkThreads(t, h) })
}

func beginSweep(t *testing.T, s store.CheckpointStore, ttl time.Duration) store.BlobSweep {
	t.Helper()
	sw, err := s.BeginBlobSweep(t.Context(), ttl)
	must(t, err, "BeginBlobSweep")
	if sw.Gen%2 != 1 || sw.ExpiresAt.IsZero() {
		t.Fatalf("BeginBlobSweep: %+v, want an odd generation and an expiry", sw)
	}
	return sw
}

func testSweepGenerations(t *testing.T, h Harness) {
	b := h.open(t)
	s := b.Store
	if w := acquire(t, s, "", "thread-gen", time.Minute); w.SweepGen != 0 {
		t.Fatalf("a fresh store's lease has SweepGen %d, want 0", w.SweepGen)
	}
	sw := beginSweep(t, s, time.Minute)
	_, err := b.second(t).BeginBlobSweep(t.Context(), time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrSweepConflict, "a second BeginBlobSweep while one is live")
	_, err = s.BeginBlobSweep(t.Context(), 0)
	wantCode(t, err, sandbox.InvalidArgument, "BeginBlobSweep with ttl 0")
	must(t, s.EndBlobSweep(t.Context(), sw), "EndBlobSweep")
	must(t, s.EndBlobSweep(t.Context(), sw), "EndBlobSweep again (a no-op)")
	next := beginSweep(t, s, time.Minute)
	if next.Gen != sw.Gen+2 {
		t.Fatalf("the next sweep's generation is %d, want %d", next.Gen, sw.Gen+2)
	}
	must(t, s.EndBlobSweep(t.Context(), sw), "EndBlobSweep of an older sweep (a no-op)")
	_, err = s.BeginBlobSweep(t.Context(), time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrSweepConflict, "the stale end left the live sweep alone")
	must(t, s.EndBlobSweep(t.Context(), next), "EndBlobSweep")
	if w := acquire(t, s, "", "thread-gen2", time.Minute); w.SweepGen != next.Gen+1 {
		t.Fatalf("a lease after two sweeps has SweepGen %d, want %d", w.SweepGen, next.Gen+1)
	}
}

func testSweepFencesAppend(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-swept"
	before := acquire(t, s, "", th, time.Minute)
	appendCk(t, s, ckpt(th, "c1", "", t0), "", before)
	sw := beginSweep(t, s, time.Minute)
	// A capture whose lease predates the sweep may have found a blob the
	// sweep deletes: refused while the sweep runs and after it ended.
	_, err := s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", before)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrBlobSwept, "append under a lease from before a live sweep")
	must(t, s.ReleaseWriter(t.Context(), before), "ReleaseWriter")
	during := acquire(t, s, "", th, time.Minute)
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", during)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrBlobSwept, "append under a lease taken during a live sweep")
	must(t, s.EndBlobSweep(t.Context(), sw), "EndBlobSweep")
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", during)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrBlobSwept, "append under a lease taken during a sweep that has ended")
	must(t, s.ReleaseWriter(t.Context(), during), "ReleaseWriter")
	after := acquire(t, s, "", th, time.Minute)
	appendCk(t, s, ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", after)
	// Renewing keeps the lease's generation.
	renewed, err := s.RenewWriter(t.Context(), after, time.Minute)
	must(t, err, "RenewWriter")
	if renewed.SweepGen != after.SweepGen {
		t.Fatalf("RenewWriter changed SweepGen %d to %d", after.SweepGen, renewed.SweepGen)
	}
	wantIDs(t, s, "", th, "c1", "c2")
}

func testSweepExpired(t *testing.T, h Harness) {
	b, clk := h.openClocked(t)
	s := b.Store
	const th = "thread-sweep-expired"
	sw := beginSweep(t, s, time.Minute)
	if want := clk.Now().Add(time.Minute); !sw.ExpiresAt.Equal(want) {
		t.Fatalf("sweep ExpiresAt = %v, want %v (the store's clock)", sw.ExpiresAt, want)
	}
	during := acquire(t, s, "", th, 10*time.Minute)
	clk.Advance(time.Minute) // the sweep's holder stopped deleting before now
	// The generation is the lease's and its sweep is over: nothing was
	// deleted after the lease's checks could have begun... except by the
	// sweep itself, which the holder stops short of its expiry.
	_, err := s.AppendCheckpoint(t.Context(), ckpt(th, "c1", "", t0), "", during)
	must(t, err, "append under the generation of an expired sweep")
	// A new sweep takes the expired one over, and fences that lease.
	next := beginSweep(t, s, time.Minute)
	if next.Gen != sw.Gen+2 {
		t.Fatalf("the takeover's generation is %d, want %d", next.Gen, sw.Gen+2)
	}
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", during)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrBlobSwept, "append after a takeover sweep")
	must(t, s.EndBlobSweep(t.Context(), sw), "EndBlobSweep of the expired sweep (a no-op)")
	_, err = s.BeginBlobSweep(t.Context(), time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrSweepConflict, "the expired sweep's end left the takeover alone")
	must(t, s.EndBlobSweep(t.Context(), next), "EndBlobSweep")
}

// testSweepRacing races appends (leases taken before the sweep, on two
// handles) with a sweep's begin and its read of the references: every
// append that published must be in what the sweep read, or the sweep would
// delete a blob a published checkpoint names.
func testSweepRacing(t *testing.T, h Harness) {
	b := h.open(t)
	s1, s2 := b.Store, b.second(t)
	const n = 16
	leases := make([]store.WriterLease, n)
	cps := make([]store.Checkpoint, n)
	for i := range n {
		th := fmt.Sprintf("thread-sweep-race-%02d", i)
		leases[i] = acquire(t, s1, "", th, time.Minute)
		cps[i] = ckpt(th, "c1", "", t0)
		cps[i].Entries[0].Blob = digest("race " + th)
	}
	errs := make([]error, n)
	var (
		wg   sync.WaitGroup
		read map[string]int
	)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s := s1
			if i%2 == 1 {
				s = s2
			}
			_, errs[i] = s.AppendCheckpoint(t.Context(), cps[i], "", leases[i])
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-start
		if _, err := s1.BeginBlobSweep(t.Context(), time.Minute); err != nil {
			t.Errorf("BeginBlobSweep: %v", err)
			return
		}
		refs, err := s1.BlobReferences(t.Context())
		if err != nil {
			t.Errorf("BlobReferences: %v", err)
			return
		}
		read = map[string]int{}
		for _, r := range refs {
			read[r.Digest] = r.References
		}
	}()
	close(start)
	wg.Wait()
	if read == nil {
		t.FailNow()
	}
	for i, err := range errs {
		if err != nil {
			wantCause(t, err, sandbox.FailedPrecondition, store.ErrBlobSwept, fmt.Sprintf("racing append %d", i))
			continue
		}
		if read[cps[i].Entries[0].Blob] == 0 {
			t.Fatalf("append %d published, but the sweep that began read no reference to its blob", i)
		}
	}
}

func testCkThreads(t *testing.T, h Harness) {
	s := h.open(t).Store
	got, err := s.ListCheckpointThreads(t.Context())
	must(t, err, "ListCheckpointThreads")
	if len(got) != 0 {
		t.Fatalf("an empty store lists threads %v", got)
	}
	for _, ref := range []store.ThreadRef{{Tenant: "t2", ThreadID: "a"}, {ThreadID: "b"}, {ThreadID: "a"}, {Tenant: "t1", ThreadID: "z"}} {
		w := acquire(t, s, ref.Tenant, ref.ThreadID, time.Minute)
		cp := ckpt(ref.ThreadID, "c1", "", t0)
		cp.Tenant = ref.Tenant
		appendCk(t, s, cp, "", w)
	}
	acquire(t, s, "", "lease-only", time.Minute) // a thread with no checkpoint is not listed
	got, err = s.ListCheckpointThreads(t.Context())
	must(t, err, "ListCheckpointThreads")
	want := []store.ThreadRef{{ThreadID: "a"}, {ThreadID: "b"}, {Tenant: "t1", ThreadID: "z"}, {Tenant: "t2", ThreadID: "a"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("ListCheckpointThreads = %v, want %v", got, want)
	}
}
