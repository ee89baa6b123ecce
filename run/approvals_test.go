package run

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// TestCheckApprovals: approvals have one field; the option that once
// carried them as JSON is refused by name, whatever its value, and the
// run gets a copy of the answers.
func TestCheckApprovals(t *testing.T) {
	in := map[string]bool{"a": true, "c": false}
	got, err := checkApprovals(map[string]string{"model": "m"}, in)
	if err != nil || len(got) != 2 || !got["a"] || got["c"] {
		t.Fatalf("checkApprovals = %v, %v", got, err)
	}
	in["a"] = false
	if !got["a"] {
		t.Error("the run's approvals share the caller's map")
	}
	if got, err := checkApprovals(nil, nil); got != nil || err != nil {
		t.Errorf("none: %v, %v", got, err)
	}
	refused := 0
	for _, c := range []struct {
		name string
		opts map[string]string
		app  map[string]bool
	}{
		{"option, valid JSON", map[string]string{"approvals": `{"a":true}`}, nil},
		{"option, not JSON", map[string]string{"approvals": "[1]"}, nil},
		{"option, empty", map[string]string{"approvals": ""}, map[string]bool{"a": true}},
		{"empty id", nil, map[string]bool{" ": true}},
	} {
		_, err := checkApprovals(c.opts, c.app)
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "approvals") {
			t.Errorf("%s: %v, want InvalidArgument naming approvals", c.name, err)
			continue
		}
		refused++
		t.Logf("%s: %v", c.name, err)
	}
	t.Logf("%d of 4 bad inputs refused", refused)
}
