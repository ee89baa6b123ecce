package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// Names of the CUSTOM events this harness adds to event's own.
const (
	// EventPlan carries the agent's plan (value: the ACP plan entries).
	EventPlan = "acp.plan"
	// EventMessageContent carries a non-text block of the agent's message
	// (an image, audio or a resource), as the ACP content block.
	EventMessageContent = "acp.message_content"
	// EventWarning carries something the user should know that is not an
	// error (value: {"message"}), e.g. MCP servers the agent cannot use.
	EventWarning = "acp.warning"
	// EventStop carries a turn's stop reason and usage when the turn ended
	// short of end_turn (value: {"stopReason","usage"}).
	EventStop = "acp.stop"
	// EventSessionNotResumed says the thread's previous session could not
	// be resumed and the prompt ran in a fresh session (value:
	// {"previous","reason"}): the agent does not remember earlier turns.
	EventSessionNotResumed = "session.not_resumed"
	// EventApprovalWaiting follows approval.requested when the request
	// waits, with the turn, for a live answer (Runner.Answer) (value:
	// {"approvalId","wait"}: how long before the policy's default decides).
	EventApprovalWaiting = event.ApprovalWaiting
	// EventApprovalAnswered says how a waiting request was settled (value:
	// {"approvalId","allowed","by"}; by: "answer", "deadline" or
	// "cancelled").
	EventApprovalAnswered = event.ApprovalAnswered
)

// Error codes of the RUN_ERROR events this harness emits.
const (
	CodeSessionLost = "acp-session-lost"
	CodeRefusal     = "refusal"
	CodeCancelled   = "cancelled"
)

// sessionLostMessage explains a journal that ends without the client's end
// record.
const sessionLostMessage = "the ACP session ended before the turn did: the corral process that " +
	"drove it went away, and an ACP session cannot outlive its client. The events up to here " +
	"are kept; the thread's next run resumes the agent's session where the agent supports session/load"

// interrupted is the result of a tool call still open when the run ended.
const interrupted = `{"status":"interrupted"}`

type toolState struct {
	id       string
	title    string
	argsSent bool // ARGS and END were emitted
	done     bool // RESULT was emitted
	input    any  // the latest raw input that says anything (else {} or nothing)
	status   string
	output   json.RawMessage // the latest rawOutput
	content  []acpsdk.ToolCallContent
	kind     string   // the latest kind the agent gave
	files    []string // the latest locations' paths
}

// translator turns an ACP run's journal into events. It keeps no clock and
// mints ids with event.IDs; tool call ids are the agent's own.
type translator struct {
	run harness.Run
	ids event.IDs

	blocks event.Blocks // the open text message and reasoning

	tools     map[string]*toolState
	order     []string // tool call ids, in the order they opened
	terminals map[string]string
	approvals map[string]bool

	ended      bool
	prompted   bool
	stopReason string
	usage      json.RawMessage
	errMsg     string
	errCode    string
}

func newTranslator(run harness.Run) *translator {
	t := &translator{run: run, ids: event.IDs{RunID: run.RunID},
		tools: map[string]*toolState{}, terminals: map[string]string{}, approvals: map[string]bool{}}
	t.blocks.IDs = &t.ids
	return t
}

func (t *translator) Begin() []event.Event {
	return []event.Event{{Type: event.RunStarted, ThreadID: t.run.ThreadID, RunID: t.run.RunID}}
}

func (t *translator) Line(line []byte) []event.Event {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return nil
	}
	var r record
	if err := json.Unmarshal(line, &r); err != nil || r.Kind == "" {
		return nil
	}
	switch r.Kind {
	case recSession:
		if r.SessionID == "" {
			return nil
		}
		out := []event.Event{event.CustomEvent(event.SessionStarted, event.Session{ID: r.SessionID})}
		if r.Previous != "" && !r.Resumed {
			out = append(out, event.CustomEvent(EventSessionNotResumed, map[string]string{"previous": r.Previous, "reason": r.Reason}))
		}
		return out
	case recUpdate:
		var n acpsdk.SessionNotification
		if err := json.Unmarshal(r.Params, &n); err != nil {
			return nil
		}
		return t.update(n.Update)
	case recPermission:
		var out []event.Event
		var tc acpsdk.ToolCallUpdate
		if json.Unmarshal(r.ToolCall, &tc) == nil && tc.ToolCallId != "" {
			asked := acpsdk.ToolCallStatus(toolAsked)
			out = append(out, t.toolUpdate(string(tc.ToolCallId), tc.Kind, tc.Title, tc.RawInput, nil, nil, nil, &asked)...)
		}
		out = append(out, t.approval(r)...)
		if r.Waiting != "" && r.ApprovalID != "" {
			out = append(out, event.CustomEvent(EventApprovalWaiting, map[string]string{"approvalId": r.ApprovalID, "wait": r.Waiting}))
		}
		return out
	case recAnswer:
		if r.ApprovalID != "" {
			return []event.Event{event.CustomEvent(EventApprovalAnswered, event.ApprovalAnswer{ApprovalID: r.ApprovalID, Allowed: r.Decision == "allow", By: r.By})}
		}
	case recFSWrite, recTerminal:
		return t.approval(r)
	case recTerminalExit:
		if r.TerminalID != "" {
			out := r.Output
			if r.ExitCode != nil && *r.ExitCode != 0 {
				out += fmt.Sprintf("\n[exit code %d]", *r.ExitCode)
			}
			t.terminals[r.TerminalID] = out
		}
	case recWarning:
		if r.Message != "" {
			return []event.Event{event.CustomEvent(EventWarning, map[string]string{"message": r.Message})}
		}
	case recPrompt:
		t.prompted, t.stopReason, t.usage = true, r.StopReason, r.Usage
	case recError:
		if t.errMsg == "" {
			t.errMsg, t.errCode = r.Message, r.Code
			if t.errMsg == "" {
				t.errMsg = "the ACP session failed"
			}
			if t.errCode == "" {
				t.errCode = "acp"
			}
		}
	case recEnd:
		t.ended = true
	case recCancel:
		// The run was cancelled; the runner ends it with its own event.
	}
	return nil
}

// approval emits approval.requested once per approval id.
func (t *translator) approval(r record) []event.Event {
	if !r.NeedsApproval || r.ApprovalID == "" || t.approvals[r.ApprovalID] {
		return nil
	}
	t.approvals[r.ApprovalID] = true
	return []event.Event{event.CustomEvent(event.ApprovalRequested, event.Approval{ID: r.ApprovalID, Kind: r.Gate, Target: r.Target, Title: r.Title})}
}

func (t *translator) update(u acpsdk.SessionUpdate) []event.Event {
	switch {
	case u.AgentMessageChunk != nil:
		return t.message(u.AgentMessageChunk.Content)
	case u.AgentThoughtChunk != nil:
		if tb := u.AgentThoughtChunk.Content.Text; tb != nil && tb.Text != "" {
			return t.thought(tb.Text)
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		kind := &tc.Kind
		if tc.Kind == "" {
			kind = nil
		}
		title := &tc.Title
		status := &tc.Status
		if tc.Status == "" {
			status = nil
		}
		return t.toolUpdate(string(tc.ToolCallId), kind, title, tc.RawInput, tc.RawOutput, tc.Content, tc.Locations, status)
	case u.ToolCallUpdate != nil:
		tc := u.ToolCallUpdate
		return t.toolUpdate(string(tc.ToolCallId), tc.Kind, tc.Title, tc.RawInput, tc.RawOutput, tc.Content, tc.Locations, tc.Status)
	case u.Plan != nil:
		entries := u.Plan.Entries
		if entries == nil {
			entries = []acpsdk.PlanEntry{}
		}
		return append(t.closeBlocks(), event.CustomEvent(EventPlan, map[string]any{"entries": entries}))
	}
	return nil
}

func (t *translator) message(c acpsdk.ContentBlock) []event.Event {
	if c.Text == nil {
		b, err := json.Marshal(c)
		if err != nil || string(b) == "" {
			return nil
		}
		return append(t.closeBlocks(), event.Event{Type: event.Custom, Name: EventMessageContent, Value: b})
	}
	return t.blocks.Text(c.Text.Text)
}

func (t *translator) thought(text string) []event.Event { return t.blocks.Reasoning(text) }
func (t *translator) closeText() []event.Event          { return t.blocks.CloseText() }
func (t *translator) closeReasoning() []event.Event     { return t.blocks.CloseReasoning() }
func (t *translator) closeBlocks() []event.Event        { return t.blocks.Close() }

// toolAsked is the status a permission request gives its tool call here:
// the input the agent asks about is the call's input.
const toolAsked = "corral:asked"

// toolUpdate applies a tool_call, tool_call_update or a permission's tool
// call (status toolAsked). The call opens (START) the first time its id is
// seen; its ARGS and END follow once its input is final; a completed or
// failed status gives its RESULT. ACP's pending status means the input
// "is either streaming or awaiting approval", and agents do open calls
// with a partial input (opencode acp: {"cwd":…} without the command;
// claude-agent-acp: {}) that a later tool_call_update completes. So the
// input is held while the call is pending and sent, the latest one that
// says anything, when the call is asked about (session/request_permission),
// leaves pending (in_progress) or ends; a call that never says more than
// {} gets {} and its title.
func (t *translator) toolUpdate(id string, kind *acpsdk.ToolKind, title *string, rawInput, rawOutput any,
	content []acpsdk.ToolCallContent, locations []acpsdk.ToolCallLocation, status *acpsdk.ToolCallStatus) []event.Event {
	if id == "" {
		return nil
	}
	var out []event.Event
	ts := t.tools[id]
	if ts == nil {
		name := "tool"
		if kind != nil && *kind != "" {
			name = string(*kind)
		}
		ts = &toolState{id: id}
		t.tools[id] = ts
		t.order = append(t.order, id)
		out = append(out, t.closeBlocks()...)
		out = append(out, event.Event{Type: event.ToolCallStart, ToolCallID: id, ToolCallName: name})
	}
	if ts.done {
		return out
	}
	if title != nil && *title != "" {
		ts.title = *title
	}
	if content != nil {
		ts.content = content
	}
	if kind != nil && *kind != "" {
		ts.kind = string(*kind)
	}
	if locations != nil {
		ts.files = ts.files[:0]
		for _, l := range locations {
			ts.files = append(ts.files, l.Path)
		}
	}
	if rawOutput != nil {
		if b, err := json.Marshal(rawOutput); err == nil {
			ts.output = b
		}
	}
	if rawInput != nil && (ts.input == nil || inputKnown(rawInput)) {
		ts.input = rawInput
	}
	if status == nil || *status == acpsdk.ToolCallStatusPending {
		return out
	}
	if !ts.argsSent {
		out = append(out, t.args(ts, ts.input)...)
	}
	if *status == toolAsked {
		return out
	}
	ts.status = string(*status)
	if *status == acpsdk.ToolCallStatusCompleted || *status == acpsdk.ToolCallStatusFailed {
		ts.done = true
		out = append(out, event.Event{Type: event.ToolCallResult, ToolCallID: id, MessageID: t.ids.Next("result"),
			Content: t.result(ts), IsError: *status == acpsdk.ToolCallStatusFailed})
		if *status == acpsdk.ToolCallStatusCompleted {
			out = append(out, fileChange(ts)...)
		}
	}
	return out
}

// fileChange is the file.changed of a completed call that edited files:
// the paths of its diff content, and for a call of kind edit (or delete,
// move) its locations. A call that edits without saying so (a terminal
// command) names no file; the run's final diff has it. Writes the agent
// makes through the client (fs/write_text_file) are journaled as such,
// not as tool calls.
func fileChange(ts *toolState) []event.Event {
	var paths []string
	for _, c := range ts.content {
		if c.Diff != nil {
			paths = append(paths, c.Diff.Path)
		}
	}
	switch acpsdk.ToolKind(ts.kind) {
	case acpsdk.ToolKindEdit, acpsdk.ToolKindDelete, acpsdk.ToolKindMove:
		paths = append(paths, ts.files...)
	}
	if e, ok := harness.ToolFileChange(ts.id, paths); ok {
		return []event.Event{e}
	}
	return nil
}

// inputKnown reports whether a tool call's raw input says something: not
// absent, null or an empty object.
func inputKnown(rawInput any) bool {
	switch v := rawInput.(type) {
	case nil:
		return false
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// args emits the call's arguments: its raw input, with its title.
func (t *translator) args(ts *toolState, rawInput any) []event.Event {
	ts.argsSent = true
	args := map[string]any{}
	if m, ok := rawInput.(map[string]any); ok {
		for k, v := range m {
			args[k] = v
		}
	} else if rawInput != nil {
		args["input"] = rawInput
	}
	if _, ok := args["title"]; !ok && ts.title != "" {
		args["title"] = ts.title
	}
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(`{}`)
	}
	return []event.Event{
		{Type: event.ToolCallArgs, ToolCallID: ts.id, Delta: string(b)},
		{Type: event.ToolCallEnd, ToolCallID: ts.id},
	}
}

// result is a finished call's output: its raw output, else its text and
// terminal content (a terminal's output as the client journaled it), else
// its other content as JSON, else its status.
func (t *translator) result(ts *toolState) string {
	if len(ts.output) > 0 && string(ts.output) != "null" {
		var s string
		if json.Unmarshal(ts.output, &s) == nil {
			return s
		}
		return string(ts.output)
	}
	var parts []string
	var other []acpsdk.ToolCallContent
	for _, c := range ts.content {
		switch {
		case c.Content != nil && c.Content.Content.Text != nil:
			parts = append(parts, c.Content.Content.Text.Text)
		case c.Terminal != nil:
			if out, ok := t.terminals[c.Terminal.TerminalId]; ok {
				parts = append(parts, out)
			}
		default:
			other = append(other, c)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "\n")
	}
	if len(other) > 0 {
		if b, err := json.Marshal(other); err == nil {
			return string(b)
		}
	}
	b, _ := json.Marshal(map[string]string{"status": ts.status})
	return string(b)
}

func (t *translator) End(code int) []event.Event {
	out := t.closeBlocks()
	for _, id := range t.order {
		ts := t.tools[id]
		if ts.done {
			continue
		}
		if !ts.argsSent {
			out = append(out, t.args(ts, ts.input)...)
		}
		ts.done = true
		out = append(out, event.Event{Type: event.ToolCallResult, ToolCallID: id, MessageID: t.ids.Next("result"), Content: interrupted, IsError: true})
	}
	c := code
	fail := func(msg, errCode string) []event.Event {
		return append(out, event.Event{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID, Message: msg, Code: errCode, ExitCode: &c})
	}
	switch {
	case t.errMsg != "":
		return fail(t.errMsg, t.errCode)
	case !t.prompted || !t.ended:
		return fail(sessionLostMessage, CodeSessionLost)
	}
	switch acpsdk.StopReason(t.stopReason) {
	case acpsdk.StopReasonRefusal:
		return fail("the agent refused the prompt", CodeRefusal)
	case acpsdk.StopReasonCancelled:
		return fail("the agent cancelled the turn", CodeCancelled)
	case acpsdk.StopReasonEndTurn, "":
	default:
		out = append(out, event.CustomEvent(EventStop, map[string]any{"stopReason": t.stopReason, "usage": t.usage}))
	}
	if code != 0 {
		return fail(fmt.Sprintf("the ACP relay exited with code %d", code), "exit")
	}
	return append(out, event.Event{Type: event.RunFinished, ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c})
}
