package run

import (
	"encoding/json"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

func TestMergeApprovals(t *testing.T) {
	opts := map[string]string{"model": "m", harness.OptionApprovals: `{"a":false,"b":true}`}
	got, err := mergeApprovals(opts, map[string]bool{"a": true, "c": false})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]bool
	if err := json.Unmarshal([]byte(got[harness.OptionApprovals]), &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || !m["a"] || !m["b"] || m["c"] || got["model"] != "m" {
		t.Errorf("merged = %v, options %v", m, got)
	}
	if opts[harness.OptionApprovals] != `{"a":false,"b":true}` {
		t.Error("the caller's options changed")
	}
	for _, c := range []struct {
		opts map[string]string
		app  map[string]bool
	}{
		{map[string]string{harness.OptionApprovals: "[1]"}, map[string]bool{"a": true}},
		{nil, map[string]bool{" ": true}},
	} {
		if _, err := mergeApprovals(c.opts, c.app); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("mergeApprovals(%v, %v) = %v, want InvalidArgument", c.opts, c.app, err)
		}
	}
}
