package api_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

func TestStatusRoundTrip(t *testing.T) {
	for c := sandbox.Unknown; c <= sandbox.Internal; c++ {
		st := api.HTTPStatus(c)
		if got := api.CodeOf(st, api.Error{Code: c.String()}); got != c {
			t.Errorf("%v → %d → %v with the code in the body", c, st, got)
		}
		if c == sandbox.Unknown || c == sandbox.Internal {
			continue // both are 500
		}
		if got := api.CodeOf(st, api.Error{}); got != c {
			t.Errorf("%v → %d → %v from the status alone", c, st, got)
		}
	}
}

func TestCodeOfRefusals(t *testing.T) {
	for st, want := range map[int]sandbox.Code{401: sandbox.PermissionDenied, 403: sandbox.PermissionDenied, 413: sandbox.InvalidArgument, 415: sandbox.InvalidArgument} {
		if got := api.CodeOf(st, api.Error{}); got != want {
			t.Errorf("CodeOf(%d) = %v, want %v", st, got, want)
		}
	}
}

// TestRunFromDuration: a finished run carries its duration (finish minus
// start, in milliseconds) and its exit code; a running one no duration.
func TestRunFromDuration(t *testing.T) {
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	zero, three := 0, 3
	for _, tc := range []struct {
		name string
		run  store.Run
		want *int64
		exit *int
	}{
		{"running", store.Run{ID: "r1", CreatedAt: start}, nil, nil},
		{"completed", store.Run{ID: "r2", CreatedAt: start, FinishedAt: start.Add(2500 * time.Millisecond), ExitCode: &zero}, ptr(int64(2500)), &zero},
		{"failed", store.Run{ID: "r3", CreatedAt: start, FinishedAt: start.Add(90 * time.Second), ExitCode: &three}, ptr(int64(90000)), &three},
		{"clock went back", store.Run{ID: "r4", CreatedAt: start, FinishedAt: start.Add(-time.Second)}, ptr(int64(0)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := api.RunFrom(tc.run, 0)
			if (got.DurationMS == nil) != (tc.want == nil) || got.DurationMS != nil && *got.DurationMS != *tc.want {
				t.Fatalf("DurationMS = %v, want %v", deref(got.DurationMS), deref(tc.want))
			}
			if (got.ExitCode == nil) != (tc.exit == nil) || got.ExitCode != nil && *got.ExitCode != *tc.exit {
				t.Fatalf("ExitCode = %v, want %v", got.ExitCode, tc.exit)
			}
			b, _ := json.Marshal(got)
			if has := strings.Contains(string(b), `"durationMs"`); has != (tc.want != nil) {
				t.Fatalf("JSON %s: durationMs present %v, want %v", b, has, tc.want != nil)
			}
			t.Logf("%s: durationMs %v", tc.name, deref(got.DurationMS))
		})
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *int64) any {
	if p == nil {
		return "absent"
	}
	return *p
}
