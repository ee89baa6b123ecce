package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RunRunStore checks the RunStore contract, including the durable fields.
func RunRunStore(t *testing.T, h Harness) {
	t.Run("CreateGet", func(t *testing.T) { testRunCreateGet(t, h) })
	t.Run("CreateValidation", func(t *testing.T) { testRunCreateValidation(t, h) })
	t.Run("DurableFields", func(t *testing.T) { testRunDurableFields(t, h) })
	t.Run("UpdateStatus", func(t *testing.T) { testRunUpdateStatus(t, h) })
	t.Run("UpdateFences", func(t *testing.T) { testRunUpdateFences(t, h) })
	t.Run("Claim", func(t *testing.T) { testRunClaim(t, h) })
	t.Run("ConcurrentClaims", func(t *testing.T) { testRunConcurrentClaims(t, h) })
	t.Run("ActiveRun", func(t *testing.T) { testRunActive(t, h) })
	t.Run("List", func(t *testing.T) { testRunList(t, h) })
	t.Run("ListReclaimable", func(t *testing.T) { testRunReclaimable(t, h) })
}

func getRun(t *testing.T, s store.RunStore, id string) store.Run {
	t.Helper()
	r, ok, err := s.GetRun(t.Context(), id)
	must(t, err, "GetRun "+id)
	if !ok {
		t.Fatalf("GetRun %q: not found", id)
	}
	for name, tm := range map[string]time.Time{
		"CreatedAt": r.CreatedAt, "UpdatedAt": r.UpdatedAt, "FinishedAt": r.FinishedAt,
		"DetachedSince": r.DetachedSince, "CancelRequested": r.CancelRequested,
	} {
		checkUTCms(t, tm, name)
	}
	return r
}

func createRun(t *testing.T, s store.RunStore, r store.Run) store.Run {
	t.Helper()
	must(t, s.CreateRun(t.Context(), r), "CreateRun "+r.ID)
	return getRun(t, s, r.ID)
}

func update(t *testing.T, s store.RunStore, id string, p store.RunPatch) store.Run {
	t.Helper()
	r, err := s.UpdateRun(t.Context(), id, p)
	must(t, err, "UpdateRun "+id)
	if again := getRun(t, s, id); fmtRun(again) != fmtRun(r) {
		t.Fatalf("UpdateRun returned\n %s\nbut GetRun reads\n %s", fmtRun(r), fmtRun(again))
	}
	return r
}

func intp(n int) *int       { return &n }
func int64p(n int64) *int64 { return &n }

func testRunCreateGet(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	if r, ok, err := s.GetRun(ctx, "missing"); ok || err != nil || r.ID != "" {
		t.Fatalf("GetRun(missing) = %s, %v, %v; want zero, false, nil", fmtRun(r), ok, err)
	}

	ms := func(n int64) time.Time { return time.UnixMilli(1_700_000_000_000 + n).Add(999 * time.Microsecond) }
	full := store.Run{
		ID: "run-full", ThreadID: "th", Tenant: "acme", DefinitionID: "def", Harness: "claude-code",
		Status: store.RunFailed, CreatedAt: ms(1), UpdatedAt: ms(2), FinishedAt: ms(3),
		Error: "exit 3", ExitCode: intp(3), JournalNonce: "0123456789abcdef0123456789abcdef",
		SandboxKey: "sbk", DetachedSince: ms(4), CancelRequested: ms(5), DriverEpoch: 7,
		PolicyUnenforced: `[{"rule":"default","decision":"ask","reason":"r"}]`,
		Prompt:           "fix the bug in\nmain.go: «ünïcode» and 'quotes'",
	}
	got := createRun(t, s, full)
	want := full
	want.CreatedAt, want.UpdatedAt, want.FinishedAt = store.Millis(ms(1)), store.Millis(ms(2)), store.Millis(ms(3))
	want.DetachedSince, want.CancelRequested = store.Millis(ms(4)), store.Millis(ms(5))
	if fmtRun(got) != fmtRun(want) {
		t.Fatalf("round trip:\n got %s\nwant %s", fmtRun(got), fmtRun(want))
	}

	// Never-written optional fields read back absent, not as some default.
	before := time.Now().Add(-time.Millisecond)
	min := createRun(t, s, store.Run{ID: "run-min", ThreadID: "th"})
	after := time.Now().Add(time.Millisecond)
	if min.Status != store.RunRunning {
		t.Errorf("default status %q, want running", min.Status)
	}
	if min.CreatedAt.Before(before) || min.CreatedAt.After(after) || !min.UpdatedAt.Equal(min.CreatedAt) {
		t.Errorf("default CreatedAt/UpdatedAt %v/%v, want the time of creation", min.CreatedAt, min.UpdatedAt)
	}
	if !min.FinishedAt.IsZero() || min.Error != "" || min.ExitCode != nil || min.SandboxKey != "" ||
		!min.DetachedSince.IsZero() || !min.CancelRequested.IsZero() || min.DriverEpoch != 0 ||
		min.Tenant != "" || min.Harness != "" || min.DefinitionID != "" || min.JournalNonce != "" || min.PolicyUnenforced != "" || min.Prompt != "" {
		t.Errorf("a minimal run reads back with optional fields set: %s", fmtRun(min))
	}
	// Exit code 0 is a value.
	zero := createRun(t, s, store.Run{ID: "run-exit0", ThreadID: "th", ExitCode: intp(0)})
	if zero.ExitCode == nil || *zero.ExitCode != 0 {
		t.Errorf("ExitCode 0 read back as %v", zero.ExitCode)
	}

	err := s.CreateRun(ctx, store.Run{ID: "run-full", ThreadID: "other"})
	wantCode(t, err, sandbox.AlreadyExists, "CreateRun of an existing id")
	if again := getRun(t, s, "run-full"); fmtRun(again) != fmtRun(want) {
		t.Fatalf("a refused duplicate create changed the run:\n %s", fmtRun(again))
	}
}

func testRunCreateValidation(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	for name, r := range map[string]store.Run{
		"no ID":          {ThreadID: "t"},
		"no ThreadID":    {ID: "r"},
		"invalid status": {ID: "r", ThreadID: "t", Status: "interrupted-ish"},
		"negative epoch": {ID: "r", ThreadID: "t", DriverEpoch: -1},
	} {
		wantCode(t, s.CreateRun(ctx, r), sandbox.InvalidArgument, "CreateRun "+name)
	}
	if _, ok, _ := s.GetRun(ctx, "r"); ok {
		t.Fatal("an invalid CreateRun stored a run")
	}
	_, err := s.UpdateRun(ctx, "missing", store.RunPatch{Error: store.Set("x")})
	wantCode(t, err, sandbox.NotFound, "UpdateRun(missing)")
	createRun(t, s, store.Run{ID: "r", ThreadID: "t"})
	_, err = s.UpdateRun(ctx, "r", store.RunPatch{Status: store.Clear[store.RunStatus]()})
	wantCode(t, err, sandbox.InvalidArgument, "UpdateRun clearing Status")
	_, err = s.UpdateRun(ctx, "r", store.RunPatch{Status: store.Set[store.RunStatus]("bogus")})
	wantCode(t, err, sandbox.InvalidArgument, "UpdateRun to an invalid status")
	_, err = s.ListRuns(ctx, store.RunFilter{Statuses: []store.RunStatus{"bogus"}})
	wantCode(t, err, sandbox.InvalidArgument, "ListRuns with an invalid status")
	_, err = s.ListRuns(ctx, store.RunFilter{Limit: -1})
	wantCode(t, err, sandbox.InvalidArgument, "ListRuns(Limit -1)")
	_, err = s.ListReclaimable(ctx, time.Now(), -1)
	wantCode(t, err, sandbox.InvalidArgument, "ListReclaimable(limit -1)")
}

// durableField describes one optional run field for the presence rules.
type durableField struct {
	name         string
	set1, set2   store.RunPatch // two different values
	clear        store.RunPatch
	setZero      *store.RunPatch // Set of the zero value, where that clears
	read         func(store.Run) string
	want1, want2 string
}

func durableFields() []durableField {
	t1 := time.UnixMilli(1_700_000_000_111)
	t2 := time.UnixMilli(1_700_000_000_222)
	tm := func(r time.Time) string {
		if r.IsZero() {
			return ""
		}
		return fmtTime(r)
	}
	return []durableField{
		{
			name: "DetachedSince",
			set1: store.RunPatch{DetachedSince: store.Set(t1)}, set2: store.RunPatch{DetachedSince: store.Set(t2)},
			clear:   store.RunPatch{DetachedSince: store.Clear[time.Time]()},
			setZero: &store.RunPatch{DetachedSince: store.Set(time.Time{})},
			read:    func(r store.Run) string { return tm(r.DetachedSince) }, want1: tm(t1), want2: tm(t2),
		},
		{
			name: "SandboxKey",
			set1: store.RunPatch{SandboxKey: store.Set("key-1")}, set2: store.RunPatch{SandboxKey: store.Set("key-2")},
			clear:   store.RunPatch{SandboxKey: store.Clear[string]()},
			setZero: &store.RunPatch{SandboxKey: store.Set("")},
			read:    func(r store.Run) string { return r.SandboxKey }, want1: "key-1", want2: "key-2",
		},
		{
			name: "CancelRequested",
			set1: store.RunPatch{CancelRequested: store.Set(t1)}, set2: store.RunPatch{CancelRequested: store.Set(t2)},
			clear:   store.RunPatch{CancelRequested: store.Clear[time.Time]()},
			setZero: &store.RunPatch{CancelRequested: store.Set(time.Time{})},
			read:    func(r store.Run) string { return tm(r.CancelRequested) }, want1: tm(t1), want2: tm(t2),
		},
		{
			name: "FinishedAt",
			set1: store.RunPatch{FinishedAt: store.Set(t1)}, set2: store.RunPatch{FinishedAt: store.Set(t2)},
			clear:   store.RunPatch{FinishedAt: store.Clear[time.Time]()},
			setZero: &store.RunPatch{FinishedAt: store.Set(time.Time{})},
			read:    func(r store.Run) string { return tm(r.FinishedAt) }, want1: tm(t1), want2: tm(t2),
		},
		{
			name: "Error",
			set1: store.RunPatch{Error: store.Set("boom")}, set2: store.RunPatch{Error: store.Set("bang")},
			clear:   store.RunPatch{Error: store.Clear[string]()},
			setZero: &store.RunPatch{Error: store.Set("")},
			read:    func(r store.Run) string { return r.Error }, want1: "boom", want2: "bang",
		},
		{
			name: "ExitCode",
			// 0 is a value, not an absence.
			set1: store.RunPatch{ExitCode: store.Set(0)}, set2: store.RunPatch{ExitCode: store.Set(137)},
			clear: store.RunPatch{ExitCode: store.Clear[int]()},
			read: func(r store.Run) string {
				if r.ExitCode == nil {
					return ""
				}
				return fmt.Sprint(*r.ExitCode)
			},
			want1: "0", want2: "137",
		},
	}
}

// testRunDurableFields pins the patch presence rules for every optional
// field: a set lands, an omitted field is left alone (also when the patch
// writes other fields), a clear reads back absent (NULL), and a field can be
// set again after a clear. A store that drops cleared fields from its
// UPDATE passes everything else and then reports live runs as detached
// forever.
func testRunDurableFields(t *testing.T, h Harness) {
	s := h.open(t).Store
	for _, f := range durableFields() {
		t.Run(f.name, func(t *testing.T) {
			id := "run-" + f.name
			check := func(r store.Run, want, when string) {
				t.Helper()
				if got := f.read(r); got != want {
					if want == "" {
						want = "absent"
					}
					t.Fatalf("%s: %s = %q, want %q\nrun: %s", when, f.name, got, want, fmtRun(r))
				}
			}
			r := createRun(t, s, store.Run{ID: id, ThreadID: "th"})
			check(r, "", "never written")
			check(update(t, s, id, f.set1), f.want1, "after set")
			check(update(t, s, id, store.RunPatch{}), f.want1, "after an empty patch")
			check(update(t, s, id, otherFieldPatch(f.name)), f.want1, "after a patch of another field")
			check(update(t, s, id, f.set2), f.want2, "after a second set")
			check(update(t, s, id, f.clear), "", "after clear")
			check(getRun(t, s, id), "", "re-read after clear")
			check(update(t, s, id, otherFieldPatch(f.name)), "", "after a patch of another field, once cleared")
			check(update(t, s, id, f.set1), f.want1, "set again after clear")
			if f.setZero != nil {
				check(update(t, s, id, *f.setZero), "", "after a set of the zero value")
			}
		})
	}

	// The detach cycle as the run flow does it: detach stamps DetachedSince
	// and SandboxKey; a takeover clears DetachedSince only; the run is
	// reclaimable in between and not after.
	t.Run("DetachCycle", func(t *testing.T) {
		ctx := t.Context()
		createRun(t, s, store.Run{ID: "cycle", ThreadID: "th"})
		at := time.Now().Add(-time.Minute)
		update(t, s, "cycle", store.RunPatch{DetachedSince: store.Set(at), SandboxKey: store.Set("sb")})
		list, err := s.ListReclaimable(ctx, time.Now(), 0)
		must(t, err, "ListReclaimable")
		if !hasRun(list, "cycle") {
			t.Fatal("a detached run is not reclaimable")
		}
		r := update(t, s, "cycle", store.RunPatch{DetachedSince: store.Clear[time.Time]()})
		if !r.DetachedSince.IsZero() || r.SandboxKey != "sb" {
			t.Fatalf("after the takeover's clear: %s", fmtRun(r))
		}
		list, err = s.ListReclaimable(ctx, time.Now(), 0)
		must(t, err, "ListReclaimable")
		if hasRun(list, "cycle") {
			t.Fatal("a re-attached run (DetachedSince cleared) is still reclaimable: the clear was dropped")
		}
	})
}

func otherFieldPatch(field string) store.RunPatch {
	if field == "Error" {
		return store.RunPatch{SandboxKey: store.Set("unrelated")}
	}
	return store.RunPatch{Error: store.Set("unrelated")}
}

func hasRun(rs []store.Run, id string) bool {
	for _, r := range rs {
		if r.ID == id {
			return true
		}
	}
	return false
}

func testRunUpdateStatus(t *testing.T, h Harness) {
	s := h.open(t).Store
	r0 := createRun(t, s, store.Run{ID: "r", ThreadID: "th", CreatedAt: time.Now().Add(-time.Hour)})
	fin := time.Now()
	r := update(t, s, "r", store.RunPatch{
		Status: store.Set(store.RunCompleted), FinishedAt: store.Set(fin), ExitCode: store.Set(0),
	})
	if r.Status != store.RunCompleted || !r.FinishedAt.Equal(store.Millis(fin)) || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("after finishing: %s", fmtRun(r))
	}
	if !r.UpdatedAt.After(r0.UpdatedAt) {
		t.Errorf("UpdatedAt %v did not move past %v", r.UpdatedAt, r0.UpdatedAt)
	}
	if !r.CreatedAt.Equal(r0.CreatedAt) || r.ThreadID != "th" || r.DriverEpoch != 0 {
		t.Errorf("an update changed fields it does not touch: %s", fmtRun(r))
	}
}

func testRunUpdateFences(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	createRun(t, s, store.Run{ID: "r", ThreadID: "th", DriverEpoch: 2})

	_, err := s.UpdateRun(ctx, "r", store.RunPatch{Error: store.Set("late"), IfEpoch: int64p(1)})
	wantCode(t, err, sandbox.FailedPrecondition, "UpdateRun with a stale IfEpoch")
	if r := getRun(t, s, "r"); r.Error != "" {
		t.Fatalf("a fenced update was written: %s", fmtRun(r))
	}
	r := update(t, s, "r", store.RunPatch{Error: store.Set("ok"), IfEpoch: int64p(2)})
	if r.Error != "ok" {
		t.Fatalf("IfEpoch matching: %s", fmtRun(r))
	}

	update(t, s, "r", store.RunPatch{Status: store.Set(store.RunFailed), IfNotTerminal: true})
	_, err = s.UpdateRun(ctx, "r", store.RunPatch{Status: store.Set(store.RunCompleted), IfNotTerminal: true})
	wantCode(t, err, sandbox.FailedPrecondition, "UpdateRun IfNotTerminal on a terminal run")
	if r := getRun(t, s, "r"); r.Status != store.RunFailed {
		t.Fatalf("a refused update changed the status to %s", r.Status)
	}
	// Without the condition a terminal run can still be annotated.
	update(t, s, "r", store.RunPatch{Error: store.Set("annotated")})
}

func testRunClaim(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	_, err := s.ClaimRun(ctx, "missing", 0)
	wantCode(t, err, sandbox.NotFound, "ClaimRun(missing)")
	createRun(t, s, store.Run{ID: "r", ThreadID: "th"})
	r, err := s.ClaimRun(ctx, "r", 0)
	must(t, err, "ClaimRun 0")
	if r.DriverEpoch != 1 {
		t.Fatalf("after claiming epoch 0: DriverEpoch %d, want 1", r.DriverEpoch)
	}
	_, err = s.ClaimRun(ctx, "r", 0)
	wantCode(t, err, sandbox.FailedPrecondition, "ClaimRun with a stale epoch")
	_, err = s.ClaimRun(ctx, "r", 5)
	wantCode(t, err, sandbox.FailedPrecondition, "ClaimRun with a future epoch")
	r, err = s.ClaimRun(ctx, "r", 1)
	must(t, err, "ClaimRun 1")
	if r.DriverEpoch != 2 || getRun(t, s, "r").DriverEpoch != 2 {
		t.Fatalf("after claiming epoch 1: DriverEpoch %d", r.DriverEpoch)
	}
	update(t, s, "r", store.RunPatch{Status: store.Set(store.RunCompleted)})
	_, err = s.ClaimRun(ctx, "r", 2)
	wantCode(t, err, sandbox.FailedPrecondition, "ClaimRun of a terminal run")
	if got := getRun(t, s, "r").DriverEpoch; got != 2 {
		t.Fatalf("a refused claim moved the epoch to %d", got)
	}
}

func testRunConcurrentClaims(t *testing.T, h Harness) {
	b := h.open(t)
	stores := []store.RunStore{b.Store, b.second(t)}
	createRun(t, b.Store, store.Run{ID: "r", ThreadID: "th", DriverEpoch: 3})
	ctx := ctxFor(t, time.Minute)
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := stores[i%2].ClaimRun(ctx, "r", 3)
			mu.Lock()
			defer mu.Unlock()
			switch sandbox.CodeOf(err) {
			case sandbox.OK:
				wins++
			case sandbox.FailedPrecondition:
			default:
				t.Errorf("ClaimRun: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of %d concurrent claims of epoch 3 won, want exactly 1", wins, n)
	}
	if got := getRun(t, b.Store, "r").DriverEpoch; got != 4 {
		t.Fatalf("DriverEpoch %d after one winning claim of 3, want 4", got)
	}
}

func testRunActive(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	base := time.UnixMilli(1_700_000_000_000)
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	if _, ok, err := s.ActiveRun(ctx, "th", ""); ok || err != nil {
		t.Fatalf("ActiveRun with no runs = %v, %v", ok, err)
	}
	createRun(t, s, store.Run{ID: "old", ThreadID: "th", CreatedAt: at(1)})
	createRun(t, s, store.Run{ID: "new", ThreadID: "th", CreatedAt: at(2)})
	createRun(t, s, store.Run{ID: "newest-done", ThreadID: "th", CreatedAt: at(3), Status: store.RunCompleted})
	createRun(t, s, store.Run{ID: "other-thread", ThreadID: "th2", CreatedAt: at(4)})
	createRun(t, s, store.Run{ID: "other-tenant", ThreadID: "th", Tenant: "acme", CreatedAt: at(5)})

	active := func(thread, tenant string) string {
		t.Helper()
		r, ok, err := s.ActiveRun(ctx, thread, tenant)
		must(t, err, "ActiveRun")
		if !ok {
			return ""
		}
		return r.ID
	}
	if got := active("th", ""); got != "new" {
		t.Fatalf("ActiveRun(th) = %q, want new (the newest non-terminal run)", got)
	}
	if got := active("th", "acme"); got != "other-tenant" {
		t.Fatalf("ActiveRun(th, acme) = %q, want other-tenant", got)
	}
	update(t, s, "new", store.RunPatch{Status: store.Set(store.RunCancelled)})
	if got := active("th", ""); got != "old" {
		t.Fatalf("ActiveRun(th) after the newest finished = %q, want old", got)
	}
	update(t, s, "old", store.RunPatch{Status: store.Set(store.RunAborted)})
	if got := active("th", ""); got != "" {
		t.Fatalf("ActiveRun(th) with every run terminal = %q, want none", got)
	}
	if got := active("nope", ""); got != "" {
		t.Fatalf("ActiveRun(unknown thread) = %q", got)
	}
	// Same CreatedAt: the greater ID is the newer.
	createRun(t, s, store.Run{ID: "tie-a", ThreadID: "tie", CreatedAt: at(9)})
	createRun(t, s, store.Run{ID: "tie-b", ThreadID: "tie", CreatedAt: at(9)})
	if got := active("tie", ""); got != "tie-b" {
		t.Fatalf("ActiveRun with equal CreatedAt = %q, want tie-b", got)
	}
}

func testRunList(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	base := time.UnixMilli(1_700_000_000_000)
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	mk := func(id, thread, tenant string, status store.RunStatus, n int) {
		createRun(t, s, store.Run{ID: id, ThreadID: thread, Tenant: tenant, Status: status, CreatedAt: at(n), UpdatedAt: at(n)})
	}
	mk("d", "t1", "", store.RunRunning, 4)
	mk("a", "t1", "", store.RunCompleted, 1)
	mk("c", "t2", "x", store.RunFailed, 2)
	mk("b", "t1", "x", store.RunRunning, 2) // same CreatedAt as c: ID breaks the tie
	mk("e", "t1", "", store.RunAborted, 5)

	ids := func(f store.RunFilter) string {
		t.Helper()
		rs, err := s.ListRuns(ctx, f)
		must(t, err, "ListRuns")
		out := ""
		for _, r := range rs {
			out += r.ID
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    store.RunFilter
		want string
	}{
		{"all", store.RunFilter{}, "abcde"},
		{"thread", store.RunFilter{ThreadID: "t1"}, "abde"},
		{"tenant", store.RunFilter{Tenant: "x"}, "bc"},
		{"statuses", store.RunFilter{Statuses: []store.RunStatus{store.RunRunning, store.RunFailed}}, "bcd"},
		{"thread+status", store.RunFilter{ThreadID: "t1", Statuses: []store.RunStatus{store.RunRunning}}, "bd"},
		{"updated before", store.RunFilter{UpdatedBefore: at(4)}, "abc"},
		{"limit", store.RunFilter{Limit: 2}, "ab"},
		{"no match", store.RunFilter{ThreadID: "t9"}, ""},
	} {
		if got := ids(c.f); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func testRunReclaimable(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	base := time.UnixMilli(1_700_000_000_000)
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	mk := func(id string, status store.RunStatus, detached time.Time) {
		createRun(t, s, store.Run{ID: id, ThreadID: "th", Status: status, DetachedSince: detached, SandboxKey: "sb-" + id})
	}
	mk("live", store.RunRunning, time.Time{})
	mk("d3", store.RunRunning, at(3))
	mk("d1", store.RunRunning, at(1))
	mk("d2", store.RunRunning, at(2))
	mk("d5", store.RunRunning, at(5))
	mk("done", store.RunCompleted, at(0))
	mk("b2", store.RunRunning, at(2)) // same time as d2: ID breaks the tie

	ids := func(before time.Time, limit int) string {
		t.Helper()
		rs, err := s.ListReclaimable(ctx, before, limit)
		must(t, err, "ListReclaimable")
		out := ""
		for _, r := range rs {
			if r.SandboxKey != "sb-"+r.ID {
				t.Errorf("listed run %s lost its SandboxKey: %s", r.ID, fmtRun(r))
			}
			out += r.ID + " "
		}
		return out
	}
	for _, c := range []struct {
		name   string
		before time.Time
		limit  int
		want   string
	}{
		{"inclusive cutoff", at(3), 0, "d1 b2 d2 d3 "},
		{"everything detached", at(100), 0, "d1 b2 d2 d3 d5 "},
		{"limit", at(100), 2, "d1 b2 "},
		{"nothing yet", at(0), 0, ""},
	} {
		if got := ids(c.before, c.limit); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
