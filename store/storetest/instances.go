package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RunInstanceStore checks the InstanceStore contract.
func RunInstanceStore(t *testing.T, h Harness) {
	t.Run("GetMissing", func(t *testing.T) { testInstanceGetMissing(t, h) })
	t.Run("RoundTrip", func(t *testing.T) { testInstanceRoundTrip(t, h) })
	t.Run("FullReplace", func(t *testing.T) { testInstanceFullReplace(t, h) })
	t.Run("Timestamps", func(t *testing.T) { testInstanceTimestamps(t, h) })
	t.Run("Delete", func(t *testing.T) { testInstanceDelete(t, h) })
	t.Run("Validation", func(t *testing.T) { testInstanceValidation(t, h) })
	t.Run("List", func(t *testing.T) { testInstanceList(t, h) })
	t.Run("ConcurrentUpserts", func(t *testing.T) { testInstanceConcurrentUpserts(t, h) })
}

func fullInstance(key string, at time.Time) store.Instance {
	return store.Instance{
		Key: key, Provider: "docker", ProviderSandboxID: "ctr-" + key, LatestSnapshotID: "snap-" + key,
		ThreadID: "thread-" + key, LatestRunID: "run-" + key, DefinitionID: "def-" + key, Tenant: "acme",
		CreatedAt: at, UpdatedAt: at,
	}
}

func getInstance(t *testing.T, s store.InstanceStore, key string) store.Instance {
	t.Helper()
	got, ok, err := s.GetInstance(t.Context(), key)
	must(t, err, "GetInstance "+key)
	if !ok {
		t.Fatalf("GetInstance %q: not found", key)
	}
	checkUTCms(t, got.CreatedAt, "CreatedAt")
	checkUTCms(t, got.UpdatedAt, "UpdatedAt")
	return got
}

func testInstanceGetMissing(t *testing.T, h Harness) {
	s := h.open(t).Store
	got, ok, err := s.GetInstance(t.Context(), "no-such-key")
	if err != nil || ok || got != (store.Instance{}) {
		t.Fatalf("GetInstance(missing) = %s, %v, %v; want zero, false, nil", fmtInstance(got), ok, err)
	}
}

func testInstanceRoundTrip(t *testing.T, h Harness) {
	s := h.open(t).Store
	at := time.UnixMilli(1_700_000_000_123).Add(456789 * time.Nanosecond) // sub-ms part is dropped
	in := fullInstance("k1", at)
	must(t, s.PutInstance(t.Context(), in), "PutInstance")
	got := getInstance(t, s, "k1")
	want := in
	want.CreatedAt, want.UpdatedAt = store.Millis(at), store.Millis(at)
	if fmtInstance(got) != fmtInstance(want) {
		t.Fatalf("round trip:\n got %s\nwant %s", fmtInstance(got), fmtInstance(want))
	}
	if got.UpdatedAt.UnixMilli() != 1_700_000_000_123 {
		t.Fatalf("UpdatedAt = %d ms, want 1700000000123", got.UpdatedAt.UnixMilli())
	}
	// Keys are opaque: long, unicode and punctuation survive.
	odd := fullInstance(`{"provider":"docker","thread":"t/1","ü":"✓"}`, at)
	must(t, s.PutInstance(t.Context(), odd), "PutInstance(odd key)")
	if got := getInstance(t, s, odd.Key); got.Key != odd.Key {
		t.Fatalf("odd key came back as %q", got.Key)
	}
}

func testInstanceFullReplace(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	at := time.UnixMilli(1_700_000_000_000)
	must(t, s.PutInstance(ctx, fullInstance("k", at)), "PutInstance(full)")

	// The same key again without the optional fields: every one of them is
	// cleared, nothing is merged from the previous record.
	bare := store.Instance{Key: "k", Provider: "local", ProviderSandboxID: "dir-2", ThreadID: "thread-2", UpdatedAt: at.Add(time.Second)}
	must(t, s.PutInstance(ctx, bare), "PutInstance(bare)")
	got := getInstance(t, s, "k")
	for _, f := range []struct{ name, v string }{
		{"LatestSnapshotID", got.LatestSnapshotID}, {"LatestRunID", got.LatestRunID},
		{"DefinitionID", got.DefinitionID}, {"Tenant", got.Tenant},
	} {
		if f.v != "" {
			t.Errorf("after a put without %s it reads %q: a put must replace the whole record", f.name, f.v)
		}
	}
	if got.Provider != "local" || got.ProviderSandboxID != "dir-2" || got.ThreadID != "thread-2" {
		t.Errorf("required fields not replaced: %s", fmtInstance(got))
	}
	if !got.UpdatedAt.Equal(at.Add(time.Second)) {
		t.Errorf("UpdatedAt = %s, want %d", fmtTime(got.UpdatedAt), at.Add(time.Second).UnixMilli())
	}
	// CreatedAt left zero keeps the stored one.
	if !got.CreatedAt.Equal(at) {
		t.Errorf("CreatedAt = %s, want the first put's %d", fmtTime(got.CreatedAt), at.UnixMilli())
	}

	// And back: set the snapshot again.
	again := bare
	again.LatestSnapshotID = "snap-3"
	must(t, s.PutInstance(ctx, again), "PutInstance(again)")
	if got := getInstance(t, s, "k"); got.LatestSnapshotID != "snap-3" {
		t.Errorf("LatestSnapshotID = %q, want snap-3", got.LatestSnapshotID)
	}
}

func testInstanceTimestamps(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	before := time.Now().Add(-time.Millisecond)
	must(t, s.PutInstance(ctx, store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t"}), "PutInstance")
	after := time.Now().Add(time.Millisecond)
	got := getInstance(t, s, "k")
	if got.UpdatedAt.Before(before) || got.UpdatedAt.After(after) {
		t.Errorf("zero UpdatedAt stored as %v, want the time of the put (%v..%v)", got.UpdatedAt, before, after)
	}
	if !got.CreatedAt.Equal(got.UpdatedAt) {
		t.Errorf("new record: CreatedAt %v != UpdatedAt %v", got.CreatedAt, got.UpdatedAt)
	}
	// An explicit CreatedAt is stored as given.
	c := time.UnixMilli(1_600_000_000_001)
	must(t, s.PutInstance(ctx, store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t", CreatedAt: c}), "PutInstance(CreatedAt)")
	if got := getInstance(t, s, "k"); !got.CreatedAt.Equal(c) {
		t.Errorf("CreatedAt = %s, want %d", fmtTime(got.CreatedAt), c.UnixMilli())
	}
	// Epoch-millisecond round trip across a range of values.
	for _, ms := range []int64{1, 999, 1_000, 1_234_567_890_123, 4_102_444_800_000} {
		tm := time.UnixMilli(ms).In(time.FixedZone("X", 5*3600))
		must(t, s.PutInstance(ctx, store.Instance{Key: "ms", Provider: "p", ProviderSandboxID: "x", ThreadID: "t", UpdatedAt: tm}), "PutInstance")
		if got := getInstance(t, s, "ms"); got.UpdatedAt.UnixMilli() != ms {
			t.Errorf("UpdatedAt %d ms came back as %d", ms, got.UpdatedAt.UnixMilli())
		}
	}
}

func testInstanceDelete(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	must(t, s.DeleteInstance(ctx, "never-stored"), "DeleteInstance(missing)")
	must(t, s.PutInstance(ctx, fullInstance("k", time.Now())), "PutInstance")
	must(t, s.PutInstance(ctx, fullInstance("other", time.Now())), "PutInstance")
	must(t, s.DeleteInstance(ctx, "k"), "DeleteInstance")
	if _, ok, err := s.GetInstance(ctx, "k"); ok || err != nil {
		t.Fatalf("GetInstance after delete = %v, %v; want false, nil", ok, err)
	}
	must(t, s.DeleteInstance(ctx, "k"), "DeleteInstance(again)")
	getInstance(t, s, "other")
}

func testInstanceValidation(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	ok := store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t"}
	for name, mut := range map[string]func(*store.Instance){
		"Key":      func(i *store.Instance) { i.Key = "" },
		"Provider": func(i *store.Instance) { i.Provider = "" },
		"ThreadID": func(i *store.Instance) { i.ThreadID = "" },
	} {
		in := ok
		mut(&in)
		wantCode(t, s.PutInstance(ctx, in), sandbox.InvalidArgument, "PutInstance without "+name)
	}
	_, err := s.ListInstances(ctx, store.InstanceFilter{Limit: -1})
	wantCode(t, err, sandbox.InvalidArgument, "ListInstances(Limit -1)")
}

func testInstanceList(t *testing.T, h Harness) {
	s := h.open(t).Store
	ctx := t.Context()
	base := time.UnixMilli(1_700_000_000_000)
	put := func(key, provider, thread, tenant string, offsetMS int) {
		t.Helper()
		must(t, s.PutInstance(ctx, store.Instance{
			Key: key, Provider: provider, ProviderSandboxID: "id-" + key, ThreadID: thread, Tenant: tenant,
			UpdatedAt: base.Add(time.Duration(offsetMS) * time.Millisecond),
		}), "PutInstance "+key)
	}
	put("e", "docker", "t1", "a", 30)
	put("b", "docker", "t2", "", 10)
	put("a", "local", "t1", "a", 10) // same UpdatedAt as b: Key breaks the tie
	put("d", "local", "t1", "b", 20)
	put("c", "docker", "t1", "a", 40)

	keys := func(f store.InstanceFilter) string {
		t.Helper()
		got, err := s.ListInstances(ctx, f)
		must(t, err, "ListInstances")
		out := ""
		for _, in := range got {
			out += in.Key
		}
		return out
	}
	for _, c := range []struct {
		name string
		f    store.InstanceFilter
		want string
	}{
		{"all", store.InstanceFilter{}, "abdec"},
		{"provider", store.InstanceFilter{Provider: "docker"}, "bec"},
		{"thread", store.InstanceFilter{ThreadID: "t1"}, "adec"},
		{"tenant", store.InstanceFilter{Tenant: "a"}, "aec"},
		{"provider+thread+tenant", store.InstanceFilter{Provider: "docker", ThreadID: "t1", Tenant: "a"}, "ec"},
		{"updated before (strict)", store.InstanceFilter{UpdatedBefore: base.Add(30 * time.Millisecond)}, "abd"},
		{"updated before, nothing", store.InstanceFilter{UpdatedBefore: base}, ""},
		{"limit", store.InstanceFilter{Limit: 2}, "ab"},
		{"filter+limit", store.InstanceFilter{ThreadID: "t1", Limit: 3}, "ade"},
		{"no match", store.InstanceFilter{Provider: "nope"}, ""},
	} {
		if got := keys(c.f); got != c.want {
			t.Errorf("%s: keys %q, want %q", c.name, got, c.want)
		}
	}
}

// testInstanceConcurrentUpserts: 16 writers (on two handles) put the same
// key at once, half of them with the optional fields and half without. The
// record left is exactly one of those written, never a mix.
func testInstanceConcurrentUpserts(t *testing.T, h Harness) {
	b := h.open(t)
	stores := []store.InstanceStore{b.Store, b.second(t)}
	ctx := ctxFor(t, time.Minute)
	const writers, rounds = 16, 5
	written := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%len(stores)]
			for r := range rounds {
				in := store.Instance{
					Key: "shared", Provider: fmt.Sprintf("p%d", w), ProviderSandboxID: fmt.Sprintf("sb-%d-%d", w, r),
					ThreadID: fmt.Sprintf("t%d", w), UpdatedAt: time.UnixMilli(int64(1_700_000_000_000 + w*100 + r)),
					CreatedAt: time.UnixMilli(1_600_000_000_000),
				}
				if w%2 == 0 {
					in.LatestSnapshotID = fmt.Sprintf("snap-%d-%d", w, r)
					in.LatestRunID = fmt.Sprintf("run-%d-%d", w, r)
					in.DefinitionID = fmt.Sprintf("def-%d", w)
					in.Tenant = fmt.Sprintf("tenant-%d", w)
				}
				mu.Lock()
				written[fmtInstance(in)] = true
				mu.Unlock()
				if err := s.PutInstance(ctx, in); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent PutInstance: %v", err)
	}
	got := getInstance(t, b.Store, "shared")
	if !written[fmtInstance(got)] {
		t.Fatalf("after concurrent upserts the record is %s, which no writer wrote", fmtInstance(got))
	}
	all, err := b.Store.ListInstances(ctx, store.InstanceFilter{})
	must(t, err, "ListInstances")
	if len(all) != 1 {
		t.Fatalf("ListInstances after concurrent upserts of one key: %d records", len(all))
	}
}
