package run

import (
	"encoding/json"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
)

// TestApprovalEventHostile: stored events that are not well-formed
// approval events are not taken for one, whatever they hold.
func TestApprovalEventHostile(t *testing.T) {
	good := event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "a1"}).Marshal()
	for _, c := range []struct {
		name string
		ev   store.Event
		ok   bool
	}{
		{"requested", store.Event{Type: "CUSTOM", Data: good}, true},
		{"not custom", store.Event{Type: "TEXT_MESSAGE_CONTENT", Data: good}, false},
		{"not JSON", store.Event{Type: "CUSTOM", Data: json.RawMessage(`{"name":"approval.requested",`)}, false},
		{"id not a string", store.Event{Type: "CUSTOM", Data: json.RawMessage(`{"type":"CUSTOM","name":"approval.requested","value":{"approvalId":7}}`)}, false},
		{"empty id", store.Event{Type: "CUSTOM", Data: json.RawMessage(`{"type":"CUSTOM","name":"approval.requested","value":{"approvalId":""}}`)}, false},
		{"value not an object", store.Event{Type: "CUSTOM", Data: json.RawMessage(`{"type":"CUSTOM","name":"approval.answered","value":"approval."}`)}, false},
		{"other custom name", store.Event{Type: "CUSTOM", Data: json.RawMessage(`{"type":"CUSTOM","name":"approval.waiting","value":{"approvalId":"a1"}}`)}, false},
		{"null data", store.Event{Type: "CUSTOM"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, id, ok := approvalEvent(c.ev)
			if ok != c.ok || (ok && id != "a1") {
				t.Fatalf("approvalEvent = %q, %v; want ok %v", id, ok, c.ok)
			}
		})
	}
}

// FuzzApprovalEvent: no stored payload makes the parser panic, and what
// it accepts names one of the two events and an id.
func FuzzApprovalEvent(f *testing.F) {
	f.Add([]byte(event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "a1"}).Marshal()))
	f.Add([]byte(event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: "a1"}).Marshal()))
	f.Add([]byte(`{"type":"CUSTOM","name":"approval.requested","value":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		name, id, ok := approvalEvent(store.Event{Type: "CUSTOM", Data: data})
		if ok && (id == "" || (name != event.ApprovalRequested && name != event.ApprovalAnswered)) {
			t.Fatalf("accepted %q as %q %q", data, name, id)
		}
	})
}
