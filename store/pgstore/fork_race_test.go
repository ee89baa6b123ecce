package pgstore_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/pgstore"
)

// TestForkRacesCreateRun: a run being created on a fork's destination
// (inserted, not yet committed) makes the fork wait for it and then refuse
// (the destination has a run), instead of publishing a fork root next to a
// run its emptiness check could not see. The verdict does not depend on
// timing: the fork is seen waiting on the thread's lock in pg_locks before
// the run commits (the poll is a hang guard), and without the lock it
// would publish at once.
func TestForkRacesCreateRun(t *testing.T) {
	url := testURL(t)
	s := open(t, url, freshSchema(t, url))
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	var b [4]byte
	_, _ = rand.Read(b[:])
	src, dst := "src-"+hex.EncodeToString(b[:]), "dst-"+hex.EncodeToString(b[:])

	ws, err := s.AcquireWriter(ctx, "", src, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendCheckpoint(ctx, store.Checkpoint{ID: "c1", ThreadID: src, Reason: store.CheckpointNamed,
		Entries: []store.Entry{{Path: "empty", Kind: store.EntryDir}}}, "", ws); err != nil {
		t.Fatal(err)
	}
	wd, err := s.AcquireWriter(ctx, "", dst, time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	ran, release := make(chan struct{}), make(chan struct{})
	created := make(chan error, 1)
	go func() { created <- s.CreateRunHeld(ctx, store.Run{ID: "run-" + dst, ThreadID: dst}, ran, release) }()
	select {
	case <-ran:
	case err := <-created:
		t.Fatalf("CreateRun: %v", err)
	}
	forked := make(chan error, 1)
	go func() {
		_, err := s.ForkCheckpoint(ctx, "", src, "c1", dst, "root", time.Time{}, wd)
		forked <- err
	}()

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx) })
	key := fmt.Sprintf("%d:%s/%s", 0, "", dst)
	deadline := time.Now().Add(time.Minute) // hang guard
	for waiting := false; !waiting; {
		select {
		case err := <-forked:
			close(release)
			t.Fatalf("the fork finished (%v) while a run on its destination was being created", err)
		default:
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the fork neither finished nor waited on the thread's lock within a minute")
		}
		if err := conn.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 2
AND classid = ($1::bigint)::oid AND objid = ((hashtext($2)::bigint + 4294967296) % 4294967296)::oid`, int64(pgstore.ThreadLockClass), key).Scan(&waiting); err != nil {
			close(release)
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := <-created; err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	err = <-forked
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !errors.Is(err, store.ErrForkDestinationNotEmpty) {
		t.Fatalf("the fork after the run committed: %v, want ErrForkDestinationNotEmpty", err)
	}
	if cps, err := s.ListCheckpoints(ctx, "", dst); err != nil || len(cps) != 0 {
		t.Fatalf("the destination has checkpoints %v (%v)", cps, err)
	}
	t.Logf("the fork waited on the thread's lock while run-%s was being created, then refused: %v", dst, err)
}
