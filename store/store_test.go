package store_test

import (
	"testing"
	"time"

	"github.com/d10ffeed/corral/store"
)

func TestOpt(t *testing.T) {
	var leave store.Opt[int]
	if !leave.Leave() || leave.IsSet() || leave.IsClear() || leave.String() != "leave" {
		t.Fatalf("zero Opt: %v", leave)
	}
	if v, ok := leave.Value(); ok || v != 0 {
		t.Fatalf("zero Opt Value = %v, %v", v, ok)
	}
	set := store.Set(0)
	if set.Leave() || !set.IsSet() || set.IsClear() || set.String() != "set(0)" {
		t.Fatalf("Set(0): %v", set)
	}
	if v, ok := set.Value(); !ok || v != 0 {
		t.Fatalf("Set(0).Value = %v, %v", v, ok)
	}
	clr := store.Clear[int]()
	if clr.Leave() || clr.IsSet() || !clr.IsClear() || clr.String() != "clear" {
		t.Fatalf("Clear: %v", clr)
	}
	if _, ok := clr.Value(); ok {
		t.Fatal("Clear has a value")
	}
}

func TestRunStatus(t *testing.T) {
	terminal := map[store.RunStatus]bool{
		store.RunRunning: false, store.RunCompleted: true, store.RunFailed: true,
		store.RunCancelled: true, store.RunAborted: true,
	}
	if len(store.RunStatuses()) != len(terminal) {
		t.Fatalf("RunStatuses() = %v", store.RunStatuses())
	}
	for _, s := range store.RunStatuses() {
		want, ok := terminal[s]
		if !ok || !s.Valid() || s.Terminal() != want {
			t.Errorf("%q: Valid %v Terminal %v, want terminal %v", s, s.Valid(), s.Terminal(), want)
		}
	}
	for _, s := range []store.RunStatus{"", "interrupted", "Running", "toString"} {
		if s.Valid() || s.Terminal() {
			t.Errorf("%q reads valid or terminal", s)
		}
	}
}

func TestMillis(t *testing.T) {
	if !store.Millis(time.Time{}).IsZero() {
		t.Fatal("Millis(zero) is not zero")
	}
	in := time.Date(2026, 3, 4, 5, 6, 7, 891_234_567, time.FixedZone("X", 3600))
	got := store.Millis(in)
	if got.Location() != time.UTC || got.UnixMilli() != in.UnixMilli() || got.Nanosecond() != 891_000_000 {
		t.Fatalf("Millis(%v) = %v", in, got)
	}
}
