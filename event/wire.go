package event

import "encoding/json"

// Metadata is what corral adds to an event beyond AG-UI's schema, in the
// place AG-UI 1.0 keeps extensions: the event's "metadata" object (open by
// key; "ag-ui" is the protocol's). The official client strips every other
// field outside the schema.
type Metadata struct {
	// ExitCode is the agent's exit code (RUN_FINISHED, RUN_ERROR).
	ExitCode *int `json:"exitCode,omitempty"`
	// IsError marks a failed tool result (TOOL_CALL_RESULT).
	IsError bool `json:"isError,omitempty"`
	// ThreadID and RunID name the run on RUN_ERROR, whose schema has no
	// such fields.
	ThreadID string `json:"threadId,omitempty"`
	RunID    string `json:"runId,omitempty"`
}

func (m *Metadata) empty() bool {
	return m.ExitCode == nil && !m.IsError && m.ThreadID == "" && m.RunID == ""
}

// wire is an event as AG-UI 1.0's schemas have it.
type wire struct {
	Type         Type            `json:"type"`
	ThreadID     string          `json:"threadId,omitempty"`
	RunID        string          `json:"runId,omitempty"`
	MessageID    string          `json:"messageId,omitempty"`
	Role         string          `json:"role,omitempty"`
	Delta        *string         `json:"delta,omitempty"`
	ToolCallID   string          `json:"toolCallId,omitempty"`
	ToolCallName *string         `json:"toolCallName,omitempty"`
	Content      *string         `json:"content,omitempty"`
	Name         string          `json:"name,omitempty"`
	Value        json.RawMessage `json:"value,omitempty"`
	Message      *string         `json:"message,omitempty"`
	Code         string          `json:"code,omitempty"`
	Outcome      *Outcome        `json:"outcome,omitempty"`
	Metadata     *Metadata       `json:"metadata,omitempty"`
	// Fields of logs written before AG-UI 1.0's shapes, read only.
	OldExitCode *int `json:"exitCode,omitempty"`
	OldIsError  bool `json:"isError,omitempty"`
}

// MarshalJSON encodes the event in AG-UI 1.0's shape: the fields its type's
// schema requires are always present (a TOOL_CALL_RESULT's content, a
// RUN_ERROR's message, a CUSTOM event's value, a delta), and corral's own
// fields (exit code, a tool result's error flag, a RUN_ERROR's thread and
// run) go in metadata (Metadata).
func (e Event) MarshalJSON() ([]byte, error) {
	w := wire{Type: e.Type, ThreadID: e.ThreadID, RunID: e.RunID, MessageID: e.MessageID, Role: e.Role,
		ToolCallID: e.ToolCallID, Name: e.Name, Value: e.Value, Code: e.Code, Outcome: e.Outcome}
	m := Metadata{ExitCode: e.ExitCode, IsError: e.IsError}
	str := func(s string) *string { return &s }
	switch e.Type {
	case TextMessageContent, ReasoningContent, ToolCallArgs:
		w.Delta = str(e.Delta)
	case ToolCallStart:
		w.ToolCallName = str(e.ToolCallName)
	case ToolCallResult:
		w.Content = str(e.Content)
	case Custom:
		if len(w.Value) == 0 {
			w.Value = json.RawMessage("null")
		}
	case RunError:
		w.Message = str(e.Message)
		m.ThreadID, m.RunID, w.ThreadID, w.RunID = e.ThreadID, e.RunID, "", ""
	case ReasoningMessageStart:
		w.Role = "reasoning"
	}
	if e.Delta != "" {
		w.Delta = str(e.Delta)
	}
	if e.Content != "" {
		w.Content = str(e.Content)
	}
	if e.Message != "" {
		w.Message = str(e.Message)
	}
	if e.ToolCallName != "" {
		w.ToolCallName = str(e.ToolCallName)
	}
	if !m.empty() {
		w.Metadata = &m
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes what MarshalJSON encodes, and the shapes of logs
// written before it (exitCode, isError and a RUN_ERROR's threadId and runId
// at the top level).
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	*e = Event{Type: w.Type, ThreadID: w.ThreadID, RunID: w.RunID, MessageID: w.MessageID, Role: w.Role,
		Delta: deref(w.Delta), ToolCallID: w.ToolCallID, ToolCallName: deref(w.ToolCallName), Content: deref(w.Content),
		Name: w.Name, Value: w.Value, Message: deref(w.Message), Code: w.Code, Outcome: w.Outcome,
		ExitCode: w.OldExitCode, IsError: w.OldIsError}
	if e.Type == Custom && string(e.Value) == "null" {
		e.Value = nil
	}
	if e.Type == ReasoningMessageStart {
		e.Role = ""
	}
	if m := w.Metadata; m != nil {
		if m.ExitCode != nil {
			e.ExitCode = m.ExitCode
		}
		e.IsError = e.IsError || m.IsError
		if e.ThreadID == "" {
			e.ThreadID = m.ThreadID
		}
		if e.RunID == "" {
			e.RunID = m.RunID
		}
	}
	return nil
}
