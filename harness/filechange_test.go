package harness

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/d10ffeed/corral/event"
)

func TestToolFileChange(t *testing.T) {
	for _, c := range []struct {
		name  string
		id    string
		paths []string
		want  []string // nil: no event
	}{
		{"one", "call-1", []string{"/w/a.go"}, []string{"/w/a.go"}},
		{"deduplicated, in order, empty dropped", "call-2", []string{"b", "", "a", "b"}, []string{"b", "a"}},
		{"no path", "call-3", []string{"", ""}, nil},
		{"no call id", "", []string{"a"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, ok := ToolFileChange(c.id, c.paths)
			if ok != (c.want != nil) {
				t.Fatalf("ok %v, want %v", ok, c.want != nil)
			}
			if !ok {
				return
			}
			var fc event.FileChange
			if err := json.Unmarshal(e.Value, &fc); err != nil || e.Name != event.FileChanged {
				t.Fatalf("%s %s: %v", e.Name, e.Value, err)
			}
			if !slices.Equal(fc.Files, c.want) || fc.ToolCallID != c.id || fc.Patch != "" {
				t.Errorf("got %+v", fc)
			}
		})
	}
}
