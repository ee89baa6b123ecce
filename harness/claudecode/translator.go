package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// interrupted is the result given to a tool call that never got one.
const interrupted = `{"status":"interrupted"}`

// translator turns Claude Code's stream-json into events. It keeps only
// what the lines told it, so a replay of the same lines yields the same
// events: message ids come from event.IDs, tool call ids are the CLI's own
// tool_use ids (recorded in the journal).
//
// Lines of sub-agents (a non-null parent_tool_use_id) are skipped: their
// parent's Task call and its result stand for them. Lines that are not
// JSON, and JSON lines of kinds it does not know (status, hooks, rate
// limits, …), are ignored. The result line's usage and cost are ignored
// too; its outcome decides the closing event: success without is_error is
// RUN_FINISHED (unless the exit code is not 0), anything else RUN_ERROR
// with the result's subtype as the code ("agent_error" for a success
// marked is_error, e.g. an authentication or API failure). A tool call
// without a result when the result line or the exit comes is given an
// interrupted one.
//
// A permission-tool denial that names an approval (see approve.js) is
// followed by an approval.requested event; the permission tool's own
// journal lines (live answers) become approval.requested, .waiting and
// .answered. A file-editing call (Write, Edit, MultiEdit, NotebookEdit)
// that succeeds is followed by a file.changed naming its path and the
// call (harness.ToolFileChange).
type translator struct {
	run harness.Run
	ids event.IDs

	session  string
	streamed map[string]bool // message ids seen in stream events
	blocks   map[int]*block  // open stream blocks by index
	order    []int           // open block indexes, in opening order
	calls    []string        // tool calls started, in order
	started  map[string]bool
	ended    map[string]bool             // TOOL_CALL_END sent
	resolved map[string]bool             // TOOL_CALL_RESULT sent
	names    map[string]string           // tool call id → tool name
	inputs   map[string]*strings.Builder // tool call id → its input JSON (streamed, or whole)

	result *resultLine // the last result line
}

type block struct {
	kind string // "text", "thinking", "tool"
	id   string // message id or tool call id
}

func newTranslator(run harness.Run) *translator {
	return &translator{
		run: run, ids: event.IDs{RunID: run.RunID},
		streamed: map[string]bool{}, blocks: map[int]*block{},
		started: map[string]bool{}, ended: map[string]bool{}, resolved: map[string]bool{},
		names: map[string]string{}, inputs: map[string]*strings.Builder{},
	}
}

// line is the envelope of a stream-json line.
type line struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	ApprovalID      string          `json:"approval_id"` // corral approval lines (approve.js)
	Kind            string          `json:"kind"`
	Target          string          `json:"target"`
	Wait            string          `json:"wait"`
	Allowed         bool            `json:"allowed"`
	By              string          `json:"by"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Event           json.RawMessage `json:"event"`
	Message         json.RawMessage `json:"message"`
}

type streamEvent struct {
	Type    string `json:"type"`
	Index   int    `json:"index"`
	Message struct {
		ID string `json:"id"`
	} `json:"message"`
	ContentBlock struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"content_block"`
	Delta struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
	} `json:"delta"`
}

type message struct {
	ID      string          `json:"id"`
	Content json.RawMessage `json:"content"`
}

type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type resultLine struct {
	Subtype string   `json:"subtype"`
	IsError bool     `json:"is_error"`
	Result  string   `json:"result"`
	Errors  []string `json:"errors"`
}

func (t *translator) Begin() []event.Event {
	return []event.Event{{Type: event.RunStarted, ThreadID: t.run.ThreadID, RunID: t.run.RunID}}
}

func (t *translator) Line(raw []byte) []event.Event {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var l line
	if json.Unmarshal(raw, &l) != nil {
		return nil
	}
	if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		return nil
	}
	switch l.Type {
	case "system":
		if l.Subtype == "init" && l.SessionID != "" && l.SessionID != t.session {
			t.session = l.SessionID
			return []event.Event{event.CustomEvent(event.SessionStarted, event.Session{ID: l.SessionID})}
		}
	case "corral":
		return t.corral(l, raw)
	case "stream_event":
		var se streamEvent
		if json.Unmarshal(l.Event, &se) != nil {
			return nil
		}
		return t.stream(se)
	case "assistant":
		return t.assistant(l.Message)
	case "user":
		return t.user(l.Message)
	case "result":
		var r resultLine
		if json.Unmarshal(raw, &r) != nil {
			return nil
		}
		t.result = &r
		out := t.closeBlocks()
		return append(out, t.interruptCalls()...)
	}
	return nil
}

// corral translates the lines corral itself adds to the journal: the
// command's resume_failed note, and the permission tool's approval lines
// (approve.js, live answers) — a request that waits, how it was settled,
// and answers it refused.
func (t *translator) corral(l line, raw []byte) []event.Event {
	switch l.Subtype {
	case "resume_failed":
		if l.SessionID != "" {
			return []event.Event{event.CustomEvent(ResumeFailed, event.Session{ID: l.SessionID})}
		}
	case "approval_waiting":
		if l.ApprovalID != "" {
			return []event.Event{
				event.CustomEvent(event.ApprovalRequested, event.Approval{ID: l.ApprovalID, Kind: l.Kind, Target: l.Target, Title: l.Kind + ": " + l.Target}),
				event.CustomEvent(event.ApprovalWaiting, map[string]string{"approvalId": l.ApprovalID, "wait": l.Wait}),
			}
		}
	case "approval_answered":
		if l.ApprovalID != "" {
			return []event.Event{event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: l.ApprovalID, Allowed: l.Allowed, By: l.By})}
		}
	case "approval_warning":
		var w struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(raw, &w) == nil && w.Message != "" {
			return []event.Event{event.CustomEvent(EventWarning, map[string]string{"message": w.Message})}
		}
	}
	return nil
}

func (t *translator) stream(se streamEvent) []event.Event {
	switch se.Type {
	case "message_start":
		out := t.closeBlocks()
		if se.Message.ID != "" {
			t.streamed[se.Message.ID] = true
		}
		return out
	case "content_block_start":
		var out []event.Event
		if _, open := t.blocks[se.Index]; open {
			out = t.closeBlock(se.Index)
		}
		switch se.ContentBlock.Type {
		case "text":
			id := t.ids.Next("msg")
			t.open(se.Index, &block{kind: "text", id: id})
			return append(out, event.Event{Type: event.TextMessageStart, MessageID: id, Role: "assistant"})
		case "thinking":
			id := t.ids.Next("reasoning")
			t.open(se.Index, &block{kind: "thinking", id: id})
			return append(out, event.OpenReasoning(id)...)
		case "tool_use":
			id := se.ContentBlock.ID
			if id == "" || t.started[id] {
				return out
			}
			t.open(se.Index, &block{kind: "tool", id: id})
			return append(out, t.startCall(id, se.ContentBlock.Name))
		}
		return out
	case "content_block_delta":
		b := t.blocks[se.Index]
		if b == nil {
			return nil
		}
		switch {
		case b.kind == "text" && se.Delta.Type == "text_delta" && se.Delta.Text != "":
			return []event.Event{{Type: event.TextMessageContent, MessageID: b.id, Delta: se.Delta.Text}}
		case b.kind == "thinking" && se.Delta.Type == "thinking_delta" && se.Delta.Thinking != "":
			return []event.Event{{Type: event.ReasoningContent, MessageID: b.id, Delta: se.Delta.Thinking}}
		case b.kind == "tool" && se.Delta.Type == "input_json_delta" && se.Delta.PartialJSON != "":
			if in := t.inputs[b.id]; in != nil {
				in.WriteString(se.Delta.PartialJSON)
			}
			return []event.Event{{Type: event.ToolCallArgs, ToolCallID: b.id, Delta: se.Delta.PartialJSON}}
		}
	case "content_block_stop":
		return t.closeBlock(se.Index)
	case "message_stop":
		return t.closeBlocks()
	}
	return nil
}

func (t *translator) open(index int, b *block) {
	t.blocks[index] = b
	t.order = append(t.order, index)
}

func (t *translator) closeBlock(index int) []event.Event {
	b := t.blocks[index]
	if b == nil {
		return nil
	}
	delete(t.blocks, index)
	for i, x := range t.order {
		if x == index {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
	switch b.kind {
	case "text":
		return []event.Event{{Type: event.TextMessageEnd, MessageID: b.id}}
	case "thinking":
		return event.CloseReasoning(b.id)
	default:
		return t.endCall(b.id)
	}
}

func (t *translator) closeBlocks() []event.Event {
	var out []event.Event
	for len(t.order) > 0 {
		out = append(out, t.closeBlock(t.order[0])...)
	}
	return out
}

func (t *translator) startCall(id, name string) event.Event {
	t.started[id] = true
	t.names[id] = name
	t.inputs[id] = &strings.Builder{}
	t.calls = append(t.calls, id)
	return event.Event{Type: event.ToolCallStart, ToolCallID: id, ToolCallName: name}
}

func (t *translator) endCall(id string) []event.Event {
	if t.ended[id] {
		return nil
	}
	t.ended[id] = true
	return []event.Event{{Type: event.ToolCallEnd, ToolCallID: id}}
}

// assistant handles a whole assistant message: blocks already streamed
// are skipped, the rest come out whole.
func (t *translator) assistant(raw json.RawMessage) []event.Event {
	var m message
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var blocks []contentBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil
	}
	streamed := m.ID != "" && t.streamed[m.ID]
	var out []event.Event
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if streamed || b.Text == "" {
				continue
			}
			id := t.ids.Next("msg")
			out = append(out,
				event.Event{Type: event.TextMessageStart, MessageID: id, Role: "assistant"},
				event.Event{Type: event.TextMessageContent, MessageID: id, Delta: b.Text},
				event.Event{Type: event.TextMessageEnd, MessageID: id})
		case "thinking":
			if streamed || b.Thinking == "" {
				continue
			}
			id := t.ids.Next("reasoning")
			out = append(append(append(out, event.OpenReasoning(id)...),
				event.Event{Type: event.ReasoningContent, MessageID: id, Delta: b.Thinking}),
				event.CloseReasoning(id)...)
		case "tool_use":
			if b.ID == "" || t.started[b.ID] {
				if in := t.inputs[b.ID]; in != nil && len(b.Input) > 0 {
					// The whole input, as streamed.
					in.Reset()
					in.Write(b.Input)
				}
				continue
			}
			out = append(out, t.startCall(b.ID, b.Name))
			t.inputs[b.ID].Write(b.Input)
			if args := compactJSON(b.Input); args != "" {
				out = append(out, event.Event{Type: event.ToolCallArgs, ToolCallID: b.ID, Delta: args})
			}
			out = append(out, t.endCall(b.ID)...)
		}
	}
	return out
}

// user handles tool results.
func (t *translator) user(raw json.RawMessage) []event.Event {
	var m message
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var blocks []contentBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil // a plain-text user message
	}
	var out []event.Event
	for _, b := range blocks {
		if b.Type != "tool_result" || !t.started[b.ToolUseID] || t.resolved[b.ToolUseID] {
			continue
		}
		out = append(out, t.closeCallBlock(b.ToolUseID)...)
		out = append(out, t.endCall(b.ToolUseID)...)
		content := resultText(b.Content)
		t.resolved[b.ToolUseID] = true
		out = append(out, event.Event{Type: event.ToolCallResult, MessageID: t.ids.Next("result"), ToolCallID: b.ToolUseID, Content: content, IsError: b.IsError})
		if b.IsError {
			if a, ok := approvalIn(content); ok {
				out = append(out, event.CustomEvent(event.ApprovalRequested, a))
			}
		} else if e, ok := t.fileChange(b.ToolUseID); ok {
			out = append(out, e)
		}
	}
	return out
}

// fileChange is the file.changed of a file-editing call that succeeded:
// Write, Edit and MultiEdit name their file_path, NotebookEdit its
// notebook_path. A Bash command's edits are not named in its output; the
// run's final diff has them.
func (t *translator) fileChange(id string) (event.Event, bool) {
	switch t.names[id] {
	case "Write", "Edit", "MultiEdit", "NotebookEdit":
	default:
		return event.Event{}, false
	}
	var in struct {
		FilePath     string `json:"file_path"`
		NotebookPath string `json:"notebook_path"`
	}
	if b := t.inputs[id]; b != nil {
		_ = json.Unmarshal([]byte(b.String()), &in)
	}
	return harness.ToolFileChange(id, []string{in.FilePath, in.NotebookPath})
}

// closeCallBlock closes the stream block of a tool call, if still open.
func (t *translator) closeCallBlock(id string) []event.Event {
	for _, idx := range t.order {
		if b := t.blocks[idx]; b.kind == "tool" && b.id == id {
			return t.closeBlock(idx)
		}
	}
	return nil
}

// interruptCalls gives every started, unresolved tool call an interrupted
// result.
func (t *translator) interruptCalls() []event.Event {
	var out []event.Event
	for _, id := range t.calls {
		if t.resolved[id] {
			continue
		}
		out = append(out, t.endCall(id)...)
		t.resolved[id] = true
		out = append(out, event.Event{Type: event.ToolCallResult, MessageID: t.ids.Next("result"), ToolCallID: id, Content: interrupted, IsError: true})
	}
	return out
}

func (t *translator) End(code int) []event.Event {
	out := t.closeBlocks()
	out = append(out, t.interruptCalls()...)
	c := code
	base := event.Event{ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c}
	switch r := t.result; {
	case r != nil && (r.IsError || (r.Subtype != "" && r.Subtype != "success")):
		e := base
		e.Type, e.Code, e.Message = event.RunError, r.Subtype, r.message()
		if r.Subtype == "" || r.Subtype == "success" {
			e.Code = "agent_error"
		}
		return append(out, e)
	case code != 0:
		e := base
		e.Type, e.Code, e.Message = event.RunError, "exit", fmt.Sprintf("claude exited with code %d", code)
		return append(out, e)
	}
	e := base
	e.Type = event.RunFinished
	return append(out, e)
}

func (r *resultLine) message() string {
	switch {
	case strings.TrimSpace(r.Result) != "":
		return r.Result
	case len(r.Errors) > 0:
		return strings.Join(r.Errors, "; ")
	case r.Subtype != "" && r.Subtype != "success":
		return "claude ended with " + r.Subtype
	}
	return "claude reported an error"
}

// resultText flattens a tool result's content: a string, or the text of
// its blocks joined by newlines (other blocks as JSON).
func resultText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return compactJSON(raw)
	}
	texts := make([]string, 0, len(parts))
	for _, p := range parts {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(p, &b) == nil && b.Type == "text" {
			texts = append(texts, b.Text)
		} else {
			texts = append(texts, compactJSON(p))
		}
	}
	return strings.Join(texts, "\n")
}

// approvalIn finds the approval line the permission tool writes into a
// denial.
func approvalIn(content string) (event.Approval, bool) {
	i := strings.LastIndex(content, approvalMarker)
	if i < 0 {
		return event.Approval{}, false
	}
	rest := content[i+len(approvalMarker):]
	if j := strings.IndexByte(rest, '\n'); j >= 0 {
		rest = rest[:j]
	}
	var a struct {
		ID     string `json:"approvalId"`
		Kind   string `json:"kind"`
		Target string `json:"target"`
	}
	if json.Unmarshal([]byte(rest), &a) != nil || a.ID == "" {
		return event.Approval{}, false
	}
	return event.Approval{ID: a.ID, Kind: a.Kind, Target: a.Target, Title: a.Kind + ": " + a.Target}, true
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	return buf.String()
}
