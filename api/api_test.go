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
