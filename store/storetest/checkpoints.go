package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Clock is a settable clock for the cases that need leases to expire
// without waiting. Its zero value is not usable; the suite makes its own.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openClocked opens a backend whose checkpoint clock is a Clock (the
// harness's NewWithClock) or, without one, skips the test.
func (h Harness) openClocked(t *testing.T) (Backend, *Clock) {
	t.Helper()
	if h.NewWithClock == nil {
		t.Skip("the harness cannot inject a clock")
	}
	c := &Clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	b := h.NewWithClock(t, c.Now)
	if b.Store == nil {
		t.Fatal("storetest: Harness.NewWithClock returned no Store")
	}
	t.Cleanup(func() {
		if err := b.Store.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return b, c
}

// RunCheckpointStore checks the CheckpointStore contract.
func RunCheckpointStore(t *testing.T, h Harness) {
	t.Run("AppendChain", func(t *testing.T) { testCkAppendChain(t, h) })
	t.Run("StaleHead", func(t *testing.T) { testCkStaleHead(t, h) })
	t.Run("ParentMismatch", func(t *testing.T) { testCkParentMismatch(t, h) })
	t.Run("DuplicateID", func(t *testing.T) { testCkDuplicate(t, h) })
	t.Run("Malformed", func(t *testing.T) { testCkMalformed(t, h) })
	t.Run("WriterConflict", func(t *testing.T) { testCkWriterConflict(t, h) })
	t.Run("ExpiredLeaseTakenOver", func(t *testing.T) { testCkTakeover(t, h) })
	t.Run("RacingAppends", func(t *testing.T) { testCkRacing(t, h) })
	t.Run("DeleteHead", func(t *testing.T) { testCkDeleteHead(t, h) })
	t.Run("Prune", func(t *testing.T) { testCkPrune(t, h) })
	t.Run("Fork", func(t *testing.T) { testCkFork(t, h) })
	t.Run("ForkRefused", func(t *testing.T) { testCkForkRefused(t, h) })
	t.Run("ForkRacesCreateRun", func(t *testing.T) { testCkForkRacesCreateRun(t, h) })
	t.Run("Tenants", func(t *testing.T) { testCkTenants(t, h) })
	t.Run("CrossHandle", func(t *testing.T) { testCkCrossHandle(t, h) })
}

// digest is the SHA-256 of s in hex.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func wantCause(t *testing.T, err error, code sandbox.Code, cause error, what string) {
	t.Helper()
	if sandbox.CodeOf(err) != code || !errors.Is(err, cause) {
		t.Fatalf("%s: got %v (code %v), want code %v with cause %q", what, err, sandbox.CodeOf(err), code, cause)
	}
}

func acquire(t *testing.T, s store.CheckpointStore, tenant, thread string, ttl time.Duration) store.WriterLease {
	t.Helper()
	w, err := s.AcquireWriter(t.Context(), tenant, thread, ttl)
	must(t, err, "AcquireWriter "+thread)
	if w.ThreadID != thread || w.Tenant != tenant || w.Token == "" || w.Fence < 1 || w.ExpiresAt.IsZero() {
		t.Fatalf("AcquireWriter %s: lease %+v", thread, w)
	}
	return w
}

// ckpt is a well-formed checkpoint with a file, an empty dir and a symlink.
func ckpt(thread, id, parent string, at time.Time) store.Checkpoint {
	return store.Checkpoint{
		ID: id, ThreadID: thread, Parent: parent, CreatedAt: at, Reason: store.CheckpointAutomatic,
		SourceRunID: "run-" + id,
		Entries: []store.Entry{
			{Path: "src/main.go", Kind: store.EntryFile, Blob: digest("main " + id), Size: 11, Mode: 0o644},
			{Path: "README.md", Kind: store.EntryFile, Blob: digest("readme"), Size: 6},
			{Path: "bin/run", Kind: store.EntryFile, Blob: digest("run"), Size: 3, Mode: 0o755},
			{Path: "empty", Kind: store.EntryDir},
			{Path: "src/link", Kind: store.EntrySymlink, Target: "../README.md"},
		},
		Conversation: digest("conversation " + id),
	}
}

func appendCk(t *testing.T, s store.CheckpointStore, cp store.Checkpoint, expected string, w store.WriterLease) store.Checkpoint {
	t.Helper()
	got, err := s.AppendCheckpoint(t.Context(), cp, expected, w)
	must(t, err, "AppendCheckpoint "+cp.ID)
	return got
}

func head(t *testing.T, s store.CheckpointStore, tenant, thread string) string {
	t.Helper()
	id, ok, err := s.Head(t.Context(), tenant, thread)
	must(t, err, "Head "+thread)
	if ok != (id != "") {
		t.Fatalf("Head %s = %q, %v: the flag disagrees with the id", thread, id, ok)
	}
	return id
}

func wantHead(t *testing.T, s store.CheckpointStore, tenant, thread, want string) {
	t.Helper()
	if got := head(t, s, tenant, thread); got != want {
		t.Fatalf("head of %s = %q, want %q", thread, got, want)
	}
}

func listIDs(t *testing.T, s store.CheckpointStore, tenant, thread string) []string {
	t.Helper()
	cps, err := s.ListCheckpoints(t.Context(), tenant, thread)
	must(t, err, "ListCheckpoints "+thread)
	ids := []string{}
	for _, cp := range cps {
		ids = append(ids, cp.ID)
	}
	return ids
}

func wantIDs(t *testing.T, s store.CheckpointStore, tenant, thread string, want ...string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if got := listIDs(t, s, tenant, thread); !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoints of %s = %q, want %q", thread, got, want)
	}
}

func refs(t *testing.T, s store.CheckpointStore) map[string]int {
	t.Helper()
	rs, err := s.BlobReferences(t.Context())
	must(t, err, "BlobReferences")
	out := map[string]int{}
	for i, r := range rs {
		if i > 0 && rs[i-1].Digest >= r.Digest {
			t.Fatalf("BlobReferences not sorted by digest: %v", rs)
		}
		if r.References < 1 {
			t.Fatalf("BlobReferences lists %s with %d references", r.Digest, r.References)
		}
		out[r.Digest] = r.References
	}
	return out
}

// wantRefs checks the reference counts against the stored checkpoints.
func wantRefs(t *testing.T, s store.CheckpointStore, cps ...store.Checkpoint) {
	t.Helper()
	want := map[string]int{}
	for _, cp := range cps {
		for _, d := range cp.Blobs() {
			want[d]++
		}
	}
	if got := refs(t, s); !reflect.DeepEqual(got, want) {
		t.Fatalf("blob references = %v, want %v", got, want)
	}
}

func fmtCk(cp store.Checkpoint) string { return fmt.Sprintf("%+v", cp) }

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func testCkAppendChain(t *testing.T, h Harness) {
	b := h.open(t)
	s := b.Store
	const th = "thread-chain"
	wantHead(t, s, "", th, "")
	wantIDs(t, s, "", th)
	w := acquire(t, s, "", th, time.Minute)
	c1in := ckpt(th, "c1", "", t0.Add(123456789)) // sub-millisecond part dropped
	c1in.Label = "first"
	c1 := appendCk(t, s, c1in, "", w)
	wantHead(t, s, "", th, "c1")
	if !c1.CreatedAt.Equal(t0.Add(123 * time.Millisecond)) {
		t.Errorf("CreatedAt = %v, want %v", c1.CreatedAt, t0.Add(123*time.Millisecond))
	}
	checkUTCms(t, c1.CreatedAt, "CreatedAt")
	if c1.Bytes != 20 {
		t.Errorf("Bytes = %d, want 20 (the files' sizes)", c1.Bytes)
	}
	for i := 1; i < len(c1.Entries); i++ {
		if c1.Entries[i-1].Path >= c1.Entries[i].Path {
			t.Fatalf("entries not sorted by path: %+v", c1.Entries)
		}
	}
	got, err := s.GetCheckpoint(t.Context(), "", th, "c1")
	must(t, err, "GetCheckpoint c1")
	if !reflect.DeepEqual(got, c1) {
		t.Fatalf("GetCheckpoint = %s\nappend returned %s", fmtCk(got), fmtCk(c1))
	}
	// Reads are copies.
	got.Entries[0].Path = "changed"
	again, err := s.GetCheckpoint(t.Context(), "", th, "c1")
	must(t, err, "GetCheckpoint c1 again")
	if again.Entries[0].Path == "changed" {
		t.Fatal("GetCheckpoint shares its entries with the store")
	}
	c2 := appendCk(t, s, ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", w)
	c3in := ckpt(th, "c3", "c2", t0.Add(2*time.Second))
	c3in.Entries, c3in.Conversation = nil, ""
	c3 := appendCk(t, s, c3in, "c2", w)
	if c3.Entries == nil || len(c3.Entries) != 0 || c3.Bytes != 0 {
		t.Fatalf("empty checkpoint stored as %s", fmtCk(c3))
	}
	// No CreatedAt: now.
	wn := acquire(t, s, "", th+"-now", time.Minute)
	cn := appendCk(t, s, ckpt(th+"-now", "n1", "", time.Time{}), "", wn)
	if cn.CreatedAt.IsZero() {
		t.Fatal("a checkpoint with no CreatedAt is stored without one")
	}
	checkUTCms(t, cn.CreatedAt, "defaulted CreatedAt")
	wantHead(t, s, "", th, "c3")
	cps, err := s.ListCheckpoints(t.Context(), "", th)
	must(t, err, "ListCheckpoints")
	if len(cps) != 3 || !reflect.DeepEqual(cps[0], c1) || !reflect.DeepEqual(cps[1], c2) || cps[2].ID != "c3" {
		t.Fatalf("ListCheckpoints = %v", cps)
	}
	wantRefs(t, s, c1, c2, c3, cn)
	if refs(t, s)[digest("readme")] != 3 {
		t.Fatal("a digest shared by two checkpoints should count 2")
	}
	_, err = s.GetCheckpoint(t.Context(), "", th, "nope")
	wantCode(t, err, sandbox.NotFound, "GetCheckpoint of a missing id")
	_, err = s.GetCheckpoint(t.Context(), "", "other-thread", "c1")
	wantCode(t, err, sandbox.NotFound, "GetCheckpoint in another thread")
}

func testCkStaleHead(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-stale"
	w := acquire(t, s, "", th, time.Minute)
	_, err := s.AppendCheckpoint(t.Context(), ckpt(th, "c1", "x", t0), "x", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrStaleHead, "expected head on an empty thread")
	appendCk(t, s, ckpt(th, "c1", "", t0), "", w)
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "", t0), "", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrStaleHead, "expected no head")
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c0", t0), "c0", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrStaleHead, "expected a wrong head")
	wantIDs(t, s, "", th, "c1")
	wantHead(t, s, "", th, "c1")
}

func testCkParentMismatch(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-parent"
	w := acquire(t, s, "", th, time.Minute)
	_, err := s.AppendCheckpoint(t.Context(), ckpt(th, "c1", "ghost", t0), "", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrParentMismatch, "parent on a first checkpoint")
	c1 := appendCk(t, s, ckpt(th, "c1", "", t0), "", w)
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "", t0), "c1", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrParentMismatch, "no parent after a head")
	wantIDs(t, s, "", th, "c1")
	wantRefs(t, s, c1)
}

func testCkDuplicate(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-dup"
	w := acquire(t, s, "", th, time.Minute)
	c1 := appendCk(t, s, ckpt(th, "c1", "", t0), "", w)
	c2 := appendCk(t, s, ckpt(th, "c2", "c1", t0), "c1", w)
	_, err := s.AppendCheckpoint(t.Context(), ckpt(th, "c1", "c2", t0), "c2", w)
	wantCode(t, err, sandbox.AlreadyExists, "append of an existing id")
	wantIDs(t, s, "", th, "c1", "c2")
	wantHead(t, s, "", th, "c2")
	wantRefs(t, s, c1, c2)
}

// malformed lists hostile checkpoints; each must be InvalidArgument.
func malformed(th string) []struct {
	name string
	mod  func(*store.Checkpoint)
} {
	file := func(p string) store.Entry {
		return store.Entry{Path: p, Kind: store.EntryFile, Blob: digest(p), Size: 1}
	}
	set := func(es ...store.Entry) func(*store.Checkpoint) {
		return func(c *store.Checkpoint) { c.Entries = es }
	}
	return []struct {
		name string
		mod  func(*store.Checkpoint)
	}{
		{"empty id", func(c *store.Checkpoint) { c.ID = "" }},
		{"empty thread", func(c *store.Checkpoint) { c.ThreadID = "" }},
		{"id not UTF-8", func(c *store.Checkpoint) { c.ID = "c\xff" }},
		{"id with NUL", func(c *store.Checkpoint) { c.ID = "c\x00" }},
		{"no reason", func(c *store.Checkpoint) { c.Reason = "" }},
		{"bad reason", func(c *store.Checkpoint) { c.Reason = "because" }},
		{"traversal", set(file("../etc/passwd"))},
		{"traversal inside", set(file("a/../../b"))},
		{"dot segment", set(file("a/./b"))},
		{"absolute", set(file("/etc/passwd"))},
		{"backslash root", set(file(`\windows\system32`))},
		{"drive letter", set(file("C:/x"))},
		{"NUL in path", set(file("a\x00b"))},
		{"empty path", set(file(""))},
		{"empty segment", set(file("a//b"))},
		{"trailing slash", set(file("a/"))},
		{"path not UTF-8", set(file("a\xffb"))},
		{"duplicate path", set(file("a"), file("a"))},
		{"file and dir at one path", set(file("a"), store.Entry{Path: "a", Kind: store.EntryDir})},
		{"entry under a file", set(file("a"), file("a/b"))},
		{"entry deep under a file", set(file("a"), file("a-b"), store.Entry{Path: "a/b/c", Kind: store.EntryDir})},
		{"bad digest", set(store.Entry{Path: "a", Kind: store.EntryFile, Blob: "abc", Size: 1})},
		{"uppercase digest", set(store.Entry{Path: "a", Kind: store.EntryFile, Blob: strings.ToUpper(digest("a")), Size: 1})},
		{"file without blob", set(store.Entry{Path: "a", Kind: store.EntryFile})},
		{"negative size", set(store.Entry{Path: "a", Kind: store.EntryFile, Blob: digest("a"), Size: -1})},
		{"bad mode", set(store.Entry{Path: "a", Kind: store.EntryFile, Blob: digest("a"), Mode: 0o4755})},
		{"world-writable mode", set(store.Entry{Path: "a", Kind: store.EntryFile, Blob: digest("a"), Mode: 0o777})},
		{"dir with blob", set(store.Entry{Path: "d", Kind: store.EntryDir, Blob: digest("d")})},
		{"dir with size", set(store.Entry{Path: "d", Kind: store.EntryDir, Size: 3})},
		{"dir with mode", set(store.Entry{Path: "d", Kind: store.EntryDir, Mode: 0o755})},
		{"symlink with blob", set(store.Entry{Path: "l", Kind: store.EntrySymlink, Target: "x", Blob: digest("x")})},
		{"symlink without target", set(store.Entry{Path: "l", Kind: store.EntrySymlink})},
		{"symlink absolute", set(store.Entry{Path: "l", Kind: store.EntrySymlink, Target: "/etc/passwd"})},
		{"symlink escaping", set(store.Entry{Path: "l", Kind: store.EntrySymlink, Target: "../x"})},
		{"symlink escaping deep", set(store.Entry{Path: "a/b/l", Kind: store.EntrySymlink, Target: "../../../x"})},
		{"symlink escaping via dotdot", set(store.Entry{Path: "l", Kind: store.EntrySymlink, Target: "a/../../x"})},
		{"symlink target NUL", set(store.Entry{Path: "l", Kind: store.EntrySymlink, Target: "a\x00"})},
		{"file with target", set(store.Entry{Path: "a", Kind: store.EntryFile, Blob: digest("a"), Target: "b"})},
		{"unknown kind", set(store.Entry{Path: "a", Kind: "fifo"})},
		{"bad conversation digest", func(c *store.Checkpoint) { c.Conversation = "zz" }},
		{"own parent", func(c *store.Checkpoint) { c.Parent = c.ID }},
		{"label with NUL", func(c *store.Checkpoint) { c.Label = "a\x00" }},
	}
}

func testCkMalformed(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-bad"
	w := acquire(t, s, "", th, time.Minute)
	for _, tc := range malformed(th) {
		t.Run(tc.name, func(t *testing.T) {
			cp := ckpt(th, "c1", "", t0)
			tc.mod(&cp)
			lease := w
			if cp.ThreadID != th {
				lease.ThreadID = cp.ThreadID
			}
			_, err := s.AppendCheckpoint(t.Context(), cp, cp.Parent, lease)
			wantCode(t, err, sandbox.InvalidArgument, tc.name)
			wantIDs(t, s, "", th)
			wantHead(t, s, "", th, "")
			wantRefs(t, s)
		})
	}
	// The well-formed edge cases are accepted.
	cp := ckpt(th, "c1", "", t0)
	cp.Entries = append(cp.Entries,
		store.Entry{Path: "a-b", Kind: store.EntryFile, Blob: digest("x")},
		store.Entry{Path: "src/self", Kind: store.EntrySymlink, Target: "."},
		store.Entry{Path: "ünï/cödé", Kind: store.EntryDir},
		store.Entry{Path: "..hidden/...", Kind: store.EntryDir},
	)
	appendCk(t, s, cp, "", w)
}

func testCkWriterConflict(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-conflict"
	w := acquire(t, s, "", th, time.Minute)
	_, err := s.AcquireWriter(t.Context(), "", th, time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterConflict, "second AcquireWriter")
	// Another thread is free.
	acquire(t, s, "", th+"-other", time.Minute)
	// A renewed lease stays the same lease.
	w2, err := s.RenewWriter(t.Context(), w, 2*time.Minute)
	must(t, err, "RenewWriter")
	if w2.Token != w.Token || w2.Fence != w.Fence || w2.ExpiresAt.Before(w.ExpiresAt) {
		t.Fatalf("RenewWriter = %+v from %+v", w2, w)
	}
	appendCk(t, s, ckpt(th, "c1", "", t0), "", w2)
	// A lease for another thread does not fence this one.
	other := w
	other.ThreadID = th + "-other"
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0), "c1", other)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append with another thread's lease")
	// A forged token is refused.
	forged := w
	forged.Token = "forged"
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0), "c1", forged)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append with a forged token")
	// Release, then the thread is free; the released lease is lost.
	must(t, s.ReleaseWriter(t.Context(), w), "ReleaseWriter")
	must(t, s.ReleaseWriter(t.Context(), w), "ReleaseWriter twice")
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0), "c1", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append after release")
	_, err = s.RenewWriter(t.Context(), w, time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "renew after release")
	w3 := acquire(t, s, "", th, time.Minute)
	if w3.Fence <= w.Fence || w3.Token == w.Token {
		t.Fatalf("reacquired lease %+v does not supersede %+v", w3, w)
	}
	_, err = s.AcquireWriter(t.Context(), "", th, 0)
	wantCode(t, err, sandbox.InvalidArgument, "AcquireWriter with ttl 0")
	_, err = s.AcquireWriter(t.Context(), "", "", time.Minute)
	wantCode(t, err, sandbox.InvalidArgument, "AcquireWriter without a thread")
}

func testCkTakeover(t *testing.T, h Harness) {
	b, clk := h.openClocked(t)
	s := b.Store
	const th = "thread-takeover"
	old := acquire(t, s, "", th, time.Minute)
	if want := clk.Now().Add(time.Minute); !old.ExpiresAt.Equal(want) {
		t.Fatalf("ExpiresAt = %v, want %v (the store's clock)", old.ExpiresAt, want)
	}
	appendCk(t, s, ckpt(th, "c1", "", t0), "", old)
	appendCk(t, s, ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", old)
	clk.Advance(59 * time.Second)
	_, err := s.AcquireWriter(t.Context(), "", th, time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterConflict, "AcquireWriter before expiry")
	clk.Advance(time.Second) // exactly at expiry: over
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c3", "c2", t0), "c2", old)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append with an expired lease")
	_, err = s.RenewWriter(t.Context(), old, time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "renew of an expired lease")
	nw := acquire(t, s, "", th, time.Minute)
	if nw.Fence <= old.Fence || nw.Token == old.Token {
		t.Fatalf("takeover lease %+v does not supersede %+v", nw, old)
	}
	_, err = s.AppendCheckpoint(t.Context(), ckpt(th, "c3", "c2", t0), "c2", old)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append by the superseded writer")
	err = s.DeleteHead(t.Context(), "", th, "c2", old)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "DeleteHead by the superseded writer")
	_, err = s.PruneCheckpoints(t.Context(), "", th, 1, time.Time{}, old)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "prune by the superseded writer")
	_, err = s.ForkCheckpoint(t.Context(), "", "elsewhere", "x", th, "f", time.Time{}, old)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "fork by the superseded writer")
	wantIDs(t, s, "", th, "c1", "c2")
	// The old writer's release leaves the new lease alone.
	must(t, s.ReleaseWriter(t.Context(), old), "ReleaseWriter of the superseded lease")
	_, err = s.AcquireWriter(t.Context(), "", th, time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterConflict, "AcquireWriter after a stale release")
	appendCk(t, s, ckpt(th, "c3", "c2", t0.Add(2*time.Second)), "c2", nw)
	// Renewal moves the expiry by the store's clock.
	clk.Advance(50 * time.Second)
	nw, err = s.RenewWriter(t.Context(), nw, time.Minute)
	must(t, err, "RenewWriter")
	if want := clk.Now().Add(time.Minute); !nw.ExpiresAt.Equal(want) {
		t.Fatalf("renewed ExpiresAt = %v, want %v", nw.ExpiresAt, want)
	}
	clk.Advance(30 * time.Second) // past the first expiry, within the renewed one
	appendCk(t, s, ckpt(th, "c4", "c3", t0.Add(3*time.Second)), "c3", nw)
	wantHead(t, s, "", th, "c4")
}

func testCkRacing(t *testing.T, h Harness) {
	b := h.open(t)
	s1, s2 := b.Store, b.second(t)
	const th = "thread-race"
	w := acquire(t, s1, "", th, time.Minute)
	appendCk(t, s1, ckpt(th, "base", "", t0), "", w)
	const n = 16
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := s1
			if i%2 == 1 {
				s = s2
			}
			_, errs[i] = s.AppendCheckpoint(t.Context(), ckpt(th, fmt.Sprintf("c%02d", i), "base", t0.Add(time.Second)), "base", w)
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("appends %d and %d both published on the same expected head", won, i)
		case err == nil:
			won = i
		default:
			wantCause(t, err, sandbox.FailedPrecondition, store.ErrStaleHead, fmt.Sprintf("racing append %d", i))
		}
	}
	if won < 0 {
		t.Fatal("no racing append published")
	}
	winner := fmt.Sprintf("c%02d", won)
	wantHead(t, s1, "", th, winner)
	wantIDs(t, s1, "", th, "base", winner)
}

func testCkDeleteHead(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-delete"
	w := acquire(t, s, "", th, time.Minute)
	c1 := appendCk(t, s, ckpt(th, "c1", "", t0), "", w)
	c2 := appendCk(t, s, ckpt(th, "c2", "c1", t0.Add(time.Second)), "c1", w)
	c3 := appendCk(t, s, ckpt(th, "c3", "c2", t0.Add(2*time.Second)), "c2", w)
	wantRefs(t, s, c1, c2, c3)
	err := s.DeleteHead(t.Context(), "", th, "c2", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrNotHead, "DeleteHead of a non-head")
	err = s.DeleteHead(t.Context(), "", th, "ghost", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrNotHead, "DeleteHead of a missing id")
	must(t, s.DeleteHead(t.Context(), "", th, "c3", w), "DeleteHead c3")
	wantHead(t, s, "", th, "c2")
	wantIDs(t, s, "", th, "c1", "c2")
	wantRefs(t, s, c1, c2)
	// A parent pruned away: the head is cleared.
	c3 = appendCk(t, s, ckpt(th, "c3", "c2", t0.Add(2*time.Second)), "c2", w)
	n, err := s.PruneCheckpoints(t.Context(), "", th, 1, time.Time{}, w)
	must(t, err, "PruneCheckpoints")
	if n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	wantRefs(t, s, c3)
	must(t, s.DeleteHead(t.Context(), "", th, "c3", w), "DeleteHead with a dangling parent")
	wantHead(t, s, "", th, "")
	wantIDs(t, s, "", th)
	wantRefs(t, s)
	// The thread starts again from no head.
	appendCk(t, s, ckpt(th, "c9", "", t0), "", w)
	must(t, s.DeleteHead(t.Context(), "", th, "c9", w), "DeleteHead of a root")
	wantHead(t, s, "", th, "")
}

func testCkPrune(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-prune"
	w := acquire(t, s, "", th, time.Minute)
	var all []store.Checkpoint
	parent := ""
	for i := range 6 {
		id := fmt.Sprintf("c%d", i)
		all = append(all, appendCk(t, s, ckpt(th, id, parent, t0.Add(time.Duration(i)*time.Hour)), parent, w))
		parent = id
	}
	n, err := s.PruneCheckpoints(t.Context(), "", th, 0, time.Time{}, w)
	must(t, err, "PruneCheckpoints without a rule")
	if n != 0 {
		t.Fatalf("a prune with neither rule deleted %d", n)
	}
	n, err = s.PruneCheckpoints(t.Context(), "", th, 4, time.Time{}, w)
	must(t, err, "PruneCheckpoints keep 4")
	if n != 2 {
		t.Fatalf("keep 4 of 6 deleted %d", n)
	}
	wantIDs(t, s, "", th, "c2", "c3", "c4", "c5")
	wantRefs(t, s, all[2:]...)
	// Age: before c4's time deletes c2 and c3.
	n, err = s.PruneCheckpoints(t.Context(), "", th, 0, t0.Add(4*time.Hour), w)
	must(t, err, "PruneCheckpoints by age")
	if n != 2 {
		t.Fatalf("the age rule deleted %d, want 2", n)
	}
	wantIDs(t, s, "", th, "c4", "c5")
	// The head survives every rule, even when it is not the newest.
	must(t, s.DeleteHead(t.Context(), "", th, "c5", w), "DeleteHead c5")
	late := ckpt(th, "c6", "c4", t0.Add(-time.Hour)) // older than everything
	all = append(all, appendCk(t, s, late, "c4", w))
	n, err = s.PruneCheckpoints(t.Context(), "", th, 1, t0.Add(100*time.Hour), w)
	must(t, err, "PruneCheckpoints of all but the head")
	if n != 1 {
		t.Fatalf("deleted %d, want 1", n)
	}
	wantIDs(t, s, "", th, "c6")
	wantHead(t, s, "", th, "c6")
	wantRefs(t, s, all[6])
	_, err = s.PruneCheckpoints(t.Context(), "", th, -1, time.Time{}, w)
	wantCode(t, err, sandbox.InvalidArgument, "PruneCheckpoints keep -1")
}

func testCkFork(t *testing.T, h Harness) {
	s := h.open(t).Store
	const src, dst = "thread-src", "thread-dst"
	ws := acquire(t, s, "", src, time.Minute)
	c1 := appendCk(t, s, ckpt(src, "c1", "", t0), "", ws)
	c2 := appendCk(t, s, ckpt(src, "c2", "c1", t0.Add(time.Second)), "c1", ws)
	wd := acquire(t, s, "", dst, time.Minute)
	at := t0.Add(time.Hour + 7*time.Microsecond)
	root, err := s.ForkCheckpoint(t.Context(), "", src, "c1", dst, "root", at, wd)
	must(t, err, "ForkCheckpoint")
	want := store.Checkpoint{
		ID: "root", ThreadID: dst, CreatedAt: t0.Add(time.Hour), Reason: store.CheckpointForkRoot,
		SourceThreadID: src, SourceCheckpointID: "c1",
		Entries: c1.Entries, Conversation: c1.Conversation, Bytes: c1.Bytes,
	}
	if !reflect.DeepEqual(root, want) {
		t.Fatalf("fork root = %s\nwant %s", fmtCk(root), fmtCk(want))
	}
	got, err := s.GetCheckpoint(t.Context(), "", dst, "root")
	must(t, err, "GetCheckpoint of the fork root")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("stored fork root = %s\nwant %s", fmtCk(got), fmtCk(want))
	}
	wantHead(t, s, "", dst, "root")
	wantIDs(t, s, "", dst, "root")
	wantHead(t, s, "", src, "c2")
	wantIDs(t, s, "", src, "c1", "c2")
	srcAgain, err := s.GetCheckpoint(t.Context(), "", src, "c1")
	must(t, err, "GetCheckpoint of the source")
	if !reflect.DeepEqual(srcAgain, c1) {
		t.Fatalf("the source changed: %s", fmtCk(srcAgain))
	}
	wantRefs(t, s, c1, c2, root)
	// The fork's thread goes on like any other.
	appendCk(t, s, ckpt(dst, "next", "root", t0.Add(2*time.Hour)), "root", wd)
	// No createdAt: now.
	wd2 := acquire(t, s, "", "thread-dst2", time.Minute)
	r2, err := s.ForkCheckpoint(t.Context(), "", src, "c2", "thread-dst2", "r2", time.Time{}, wd2)
	must(t, err, "ForkCheckpoint with no time")
	if r2.CreatedAt.IsZero() {
		t.Fatal("a fork with no time has no CreatedAt")
	}
}

func testCkForkRefused(t *testing.T, h Harness) {
	s := h.open(t).Store
	const src = "thread-src"
	ws := acquire(t, s, "", src, time.Minute)
	c1 := appendCk(t, s, ckpt(src, "c1", "", t0), "", ws)
	// The destination has a checkpoint.
	const full = "thread-full"
	wf := acquire(t, s, "", full, time.Minute)
	f1 := appendCk(t, s, ckpt(full, "f1", "", t0), "", wf)
	_, err := s.ForkCheckpoint(t.Context(), "", src, "c1", full, "root", t0, wf)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrForkDestinationNotEmpty, "fork into a thread with a checkpoint")
	wantIDs(t, s, "", full, "f1")
	wantHead(t, s, "", full, "f1")
	// The destination has a run.
	const ran = "thread-ran"
	must(t, s.CreateRun(t.Context(), store.Run{ID: "run-on-ran", ThreadID: ran}), "CreateRun")
	wr := acquire(t, s, "", ran, time.Minute)
	_, err = s.ForkCheckpoint(t.Context(), "", src, "c1", ran, "root", t0, wr)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrForkDestinationNotEmpty, "fork into a thread with a run")
	wantIDs(t, s, "", ran)
	wantHead(t, s, "", ran, "")
	// A run of the same thread id in another tenant does not count.
	must(t, s.CreateRun(t.Context(), store.Run{ID: "run-other-tenant", ThreadID: "thread-t", Tenant: "other"}), "CreateRun")
	wt := acquire(t, s, "", "thread-t", time.Minute)
	_, err = s.ForkCheckpoint(t.Context(), "", src, "c1", "thread-t", "root", t0, wt)
	must(t, err, "fork into a thread whose id has a run in another tenant")
	// Missing source.
	const empty = "thread-empty"
	we := acquire(t, s, "", empty, time.Minute)
	_, err = s.ForkCheckpoint(t.Context(), "", src, "ghost", empty, "root", t0, we)
	wantCause(t, err, sandbox.NotFound, store.ErrForkSourceNotFound, "fork from a missing checkpoint")
	_, err = s.ForkCheckpoint(t.Context(), "", "no-thread", "c1", empty, "root", t0, we)
	wantCause(t, err, sandbox.NotFound, store.ErrForkSourceNotFound, "fork from a missing thread")
	// Same thread.
	_, err = s.ForkCheckpoint(t.Context(), "", src, "c1", src, "root", t0, ws)
	wantCode(t, err, sandbox.InvalidArgument, "fork into the same thread")
	// The lease must be the destination's.
	_, err = s.ForkCheckpoint(t.Context(), "", src, "c1", empty, "root", t0, ws)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "fork under the source's lease")
	_, err = s.ForkCheckpoint(t.Context(), "", src, "c1", empty, "", t0, we)
	wantCode(t, err, sandbox.InvalidArgument, "fork with an empty destination id")
	wantIDs(t, s, "", empty)
	wantHead(t, s, "", empty, "")
	root, err := s.GetCheckpoint(t.Context(), "", "thread-t", "root")
	must(t, err, "GetCheckpoint of the fork root")
	wantRefs(t, s, c1, f1, root)
}

func testCkTenants(t *testing.T, h Harness) {
	s := h.open(t).Store
	const th = "thread-shared-id"
	wa := acquire(t, s, "a", th, time.Minute)
	wb := acquire(t, s, "b", th, time.Minute) // another tenant: no conflict
	ca := ckpt(th, "c1", "", t0)
	ca.Tenant = "a"
	appendCk(t, s, ca, "", wa)
	cb := ckpt(th, "c1", "", t0)
	cb.Tenant = "b"
	_, err := s.AppendCheckpoint(t.Context(), cb, "", wa)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append under another tenant's lease")
	appendCk(t, s, cb, "", wb)
	wantIDs(t, s, "a", th, "c1")
	wantIDs(t, s, "b", th, "c1")
	wantIDs(t, s, "", th)
	wantHead(t, s, "", th, "")
	got, err := s.GetCheckpoint(t.Context(), "b", th, "c1")
	must(t, err, "GetCheckpoint tenant b")
	if got.Tenant != "b" {
		t.Fatalf("tenant b's checkpoint has tenant %q", got.Tenant)
	}
}

func testCkCrossHandle(t *testing.T, h Harness) {
	b := h.open(t)
	if b.Reopen == nil {
		t.Skip("the store cannot be reopened")
	}
	s1, s2 := b.Store, b.second(t)
	const th = "thread-cross"
	w := acquire(t, s1, "", th, time.Minute)
	_, err := s2.AcquireWriter(t.Context(), "", th, time.Minute)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterConflict, "AcquireWriter on the second handle")
	appendCk(t, s2, ckpt(th, "c1", "", t0), "", w) // the lease is the database's, not the handle's
	wantHead(t, s1, "", th, "c1")
	must(t, s1.ReleaseWriter(t.Context(), w), "ReleaseWriter")
	_, err = s2.AppendCheckpoint(t.Context(), ckpt(th, "c2", "c1", t0), "c1", w)
	wantCause(t, err, sandbox.FailedPrecondition, store.ErrWriterLost, "append on the second handle after release")
	w2 := acquire(t, s2, "", th, time.Minute)
	if w2.Fence <= w.Fence {
		t.Fatalf("fence %d after %d", w2.Fence, w.Fence)
	}
}
