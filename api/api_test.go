package api_test

import (
	"testing"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/sandbox"
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
