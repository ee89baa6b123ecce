// Package storetest is the conformance suite every store implementation
// passes: the same cases run against memstore, sqlitestore and pgstore.
//
// An implementation's test calls Run (or one of RunInstanceStore, RunLocker,
// RunRunStore, RunEventLog, RunCheckpointStore, RunBlobSweep) with a Harness that opens a fresh, empty store
// per test. The cross-process lock cases re-execute the test binary as a
// child that holds a lock; for them the test package's TestMain must call
// Main, and the Backend must say how a child reaches the same database
// (ChildSpec). RunBlobStore checks any store.BlobStore on its own (the
// gocloud-backed store/blobstore runs it too).
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Harness tells the suite how to make stores of one implementation.
type Harness struct {
	// New opens a fresh, empty store for one test and returns it with the
	// ways to reach its database from elsewhere. The suite closes the store.
	New func(t *testing.T) Backend
	// NewWithClock, when set, opens a fresh, empty store whose checkpoint
	// writer leases expire by now instead of the wall clock; the lease
	// expiry cases skip without it.
	NewWithClock func(t *testing.T, now func() time.Time) Backend
}

// Backend is one fresh store and how to reach its database again.
type Backend struct {
	// Store is the store under test.
	Store store.Store
	// Reopen opens another store on the same database, as a second process
	// would (its own connections, its own leases). nil when the
	// implementation cannot share its state; the cases that need two
	// handles then use Store twice or skip. The suite closes what Reopen
	// returns.
	Reopen func(t *testing.T) store.Store
	// ChildSpec is passed to the open function given to Main in a child
	// process so it reaches the same database. "" skips the cross-process
	// cases with NoChildReason.
	ChildSpec string
	// NoChildReason says why the cross-process cases do not apply, e.g.
	// "in-process locker".
	NoChildReason string
}

// Run runs the whole suite: instances, locker, runs, the event log,
// retention, the checkpoints and the store's own blobs.
func Run(t *testing.T, h Harness) {
	t.Run("Instances", func(t *testing.T) { RunInstanceStore(t, h) })
	t.Run("Locker", func(t *testing.T) { RunLocker(t, h) })
	t.Run("Runs", func(t *testing.T) { RunRunStore(t, h) })
	t.Run("Events", func(t *testing.T) { RunEventLog(t, h) })
	t.Run("Retention", func(t *testing.T) { RunForgetter(t, h) })
	t.Run("Checkpoints", func(t *testing.T) { RunCheckpointStore(t, h) })
	t.Run("BlobSweep", func(t *testing.T) { RunBlobSweep(t, h) })
	t.Run("Blobs", func(t *testing.T) {
		RunBlobStore(t, func(t *testing.T) store.BlobStore { return h.open(t).Store })
	})
}

// open makes a fresh backend and registers its closing.
func (h Harness) open(t *testing.T) Backend {
	t.Helper()
	b := h.New(t)
	if b.Store == nil {
		t.Fatal("storetest: Harness.New returned no Store")
	}
	t.Cleanup(func() {
		if err := b.Store.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return b
}

// second returns another handle on b's database (b.Store itself when the
// implementation cannot reopen).
func (b Backend) second(t *testing.T) store.Store {
	t.Helper()
	if b.Reopen == nil {
		return b.Store
	}
	s := b.Reopen(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err error, want sandbox.Code, what string) {
	t.Helper()
	if got := sandbox.CodeOf(err); got != want {
		t.Fatalf("%s: got error code %v (%v), want %v", what, got, err, want)
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func fmtTime(tm time.Time) string {
	if tm.IsZero() {
		return "absent"
	}
	return fmt.Sprintf("%d", tm.UnixMilli())
}

func fmtInstance(in store.Instance) string {
	return fmt.Sprintf("{Key:%q Provider:%q ProviderSandboxID:%q LatestSnapshotID:%q ThreadID:%q LatestRunID:%q DefinitionID:%q Tenant:%q CreatedAt:%s UpdatedAt:%s}",
		in.Key, in.Provider, in.ProviderSandboxID, in.LatestSnapshotID, in.ThreadID, in.LatestRunID,
		in.DefinitionID, in.Tenant, fmtTime(in.CreatedAt), fmtTime(in.UpdatedAt))
}

func fmtRun(r store.Run) string {
	exit := "absent"
	if r.ExitCode != nil {
		exit = fmt.Sprint(*r.ExitCode)
	}
	return fmt.Sprintf("{ID:%q ThreadID:%q Tenant:%q DefinitionID:%q Harness:%q Status:%q CreatedAt:%s UpdatedAt:%s FinishedAt:%s Error:%q ExitCode:%s JournalNonce:%q SandboxKey:%q DetachedSince:%s CancelRequested:%s DriverEpoch:%d PolicyUnenforced:%q Prompt:%q}",
		r.ID, r.ThreadID, r.Tenant, r.DefinitionID, r.Harness, r.Status, fmtTime(r.CreatedAt), fmtTime(r.UpdatedAt),
		fmtTime(r.FinishedAt), r.Error, exit, r.JournalNonce, r.SandboxKey, fmtTime(r.DetachedSince),
		fmtTime(r.CancelRequested), r.DriverEpoch, r.PolicyUnenforced, r.Prompt)
}

// checkUTCms fails unless tm is in UTC and whole milliseconds.
func checkUTCms(t *testing.T, tm time.Time, what string) {
	t.Helper()
	if tm.IsZero() {
		return
	}
	if tm.Location() != time.UTC || tm.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("%s = %v: want UTC, whole milliseconds", what, tm)
	}
}
