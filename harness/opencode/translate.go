package opencode

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// rejectedMarker is in the error OpenCode gives a tool call whose
// permission asked and that `opencode run` rejected. (A deny rule gives
// "The user has specified a rule which prevents you from using this
// specific tool call": a plain error result, no approval.)
const rejectedMarker = "rejected permission"

// line is one event of `opencode run --format json`.
type line struct {
	Type      string    `json:"type"`
	SessionID string    `json:"sessionID"`
	Part      *part     `json:"part"`
	Error     *apiError `json:"error"`
}

// apiError is an error OpenCode reports (in run mode's error lines and the
// server's session.error).
type apiError struct {
	Name string `json:"name"`
	Data struct {
		Message string `json:"message"`
	} `json:"data"`
}

// message is the error's text: its message, else its name, else a
// generic one.
func (e *apiError) message() string {
	switch {
	case e == nil:
	case e.Data.Message != "":
		return e.Data.Message
	case e.Name != "":
		return e.Name
	}
	return "opencode reported an error"
}

// part is an OpenCode message part (text, reasoning, tool, step-*).
type part struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Tool   string `json:"tool"`
	CallID string `json:"callID"`
	State  struct {
		Status   string          `json:"status"`
		Input    json.RawMessage `json:"input"`
		Output   string          `json:"output"`
		Error    string          `json:"error"`
		Metadata struct {
			Exit *int `json:"exit"`
		} `json:"metadata"`
	} `json:"state"`
}

// toolInput is the part of a tool's input the approvals use.
type toolInput struct {
	Command  string `json:"command"`
	FilePath string `json:"filePath"`
	URL      string `json:"url"`
}

type translator struct {
	run     harness.Run
	ids     event.IDs
	session string
	errMsg  string
	// decided is set by the first event line: a journal that starts with
	// serve-client.js's corral.client line is server mode's, translated
	// by server.
	decided bool
	server  *serverTranslator
}

func newTranslator(run harness.Run) *translator {
	return &translator{run: run, ids: event.IDs{RunID: run.RunID}}
}

func (t *translator) Begin() []event.Event {
	return []event.Event{{Type: event.RunStarted, ThreadID: t.run.ThreadID, RunID: t.run.RunID}}
}

func (t *translator) Line(b []byte) []event.Event {
	if t.server != nil {
		return t.server.Line(b)
	}
	var l line
	if json.Unmarshal(b, &l) != nil {
		return nil
	}
	if !t.decided && l.Type != "" {
		t.decided = true
		if l.Type == clientLine {
			t.server = newServerTranslator(t.run)
			return t.server.Line(b)
		}
	}
	var out []event.Event
	if l.SessionID != "" && l.SessionID != t.session {
		t.session = l.SessionID
		out = append(out, event.CustomEvent(event.SessionStarted, event.Session{ID: l.SessionID}))
	}
	switch l.Type {
	case "text", "reasoning":
		if l.Part == nil || l.Part.Text == "" {
			return out
		}
		if l.Type == "text" {
			id := t.ids.Next("msg")
			return append(out,
				event.Event{Type: event.TextMessageStart, MessageID: id, Role: "assistant"},
				event.Event{Type: event.TextMessageContent, MessageID: id, Delta: l.Part.Text},
				event.Event{Type: event.TextMessageEnd, MessageID: id})
		}
		id := t.ids.Next("reasoning")
		return append(append(append(out, event.OpenReasoning(id)...),
			event.Event{Type: event.ReasoningContent, MessageID: id, Delta: l.Part.Text}),
			event.CloseReasoning(id)...)
	case "tool_use":
		if l.Part == nil {
			return out
		}
		return append(out, t.tool(l.Part)...)
	case "error":
		msg := l.Error.message()
		if t.errMsg == "" {
			t.errMsg = msg
		} else {
			t.errMsg += "\n" + msg
		}
	}
	return out
}

// commandResult is a bash tool's result.
type commandResult struct {
	ExitCode *int   `json:"exitCode"`
	Output   string `json:"output"`
}

// tool translates a finished tool part: OpenCode prints a tool call once
// it completed or failed, so each one opens and resolves at once.
func (t *translator) tool(p *part) []event.Event {
	id := t.ids.Next("tool")
	name := p.Tool
	if name == "" {
		name = "tool"
	}
	args := "{}"
	if len(p.State.Input) > 0 && json.Valid(p.State.Input) {
		args = string(p.State.Input)
	}
	out := []event.Event{
		{Type: event.ToolCallStart, ToolCallID: id, ToolCallName: name},
		{Type: event.ToolCallArgs, ToolCallID: id, Delta: args},
		{Type: event.ToolCallEnd, ToolCallID: id},
	}
	out = append(out, toolResult(id, t.ids.Next("result"), name, p))
	if p.State.Status == "error" && strings.Contains(p.State.Error, rejectedMarker) {
		out = append(out, approval(name, p.State.Input))
	}
	return append(out, fileChange(id, name, p)...)
}

// fileChange is the file.changed of an editing tool call that completed
// (edit, write, multiedit: its filePath; apply_patch and patch: the files
// its patchText adds, updates, moves to or deletes). A bash command's edits
// are not named in its output; the run's final diff has them.
func fileChange(id, name string, p *part) []event.Event {
	if p.State.Status != "completed" || permissionKey(name) != "edit" {
		return nil
	}
	var in struct {
		FilePath  string `json:"filePath"`
		PatchText string `json:"patchText"`
	}
	_ = json.Unmarshal(p.State.Input, &in)
	paths := []string{in.FilePath}
	for _, l := range strings.Split(in.PatchText, "\n") {
		for _, prefix := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "} {
			if rest, ok := strings.CutPrefix(strings.TrimRight(l, "\r"), prefix); ok {
				paths = append(paths, strings.TrimSpace(rest))
			}
		}
	}
	if e, ok := harness.ToolFileChange(id, paths); ok {
		return []event.Event{e}
	}
	return nil
}

// toolResult is the TOOL_CALL_RESULT of a completed or failed tool part;
// msgID is the tool message AG-UI mints for it.
func toolResult(id, msgID, name string, p *part) event.Event {
	e := toolResultOf(id, name, p)
	e.MessageID = msgID
	return e
}

func toolResultOf(id, name string, p *part) event.Event {
	switch {
	case p.State.Status == "error":
		return event.Event{Type: event.ToolCallResult, ToolCallID: id, Content: p.State.Error, IsError: true}
	case name == "bash":
		return event.Event{Type: event.ToolCallResult, ToolCallID: id,
			Content: jsonString(commandResult{ExitCode: p.State.Metadata.Exit, Output: p.State.Output}),
			IsError: p.State.Metadata.Exit != nil && *p.State.Metadata.Exit != 0}
	default:
		return event.Event{Type: event.ToolCallResult, ToolCallID: id, Content: p.State.Output}
	}
}

// approval is the approval.requested event for a tool call OpenCode
// rejected because its permission asked.
func approval(tool string, raw json.RawMessage) event.Event {
	var in toolInput
	_ = json.Unmarshal(raw, &in)
	kind, target, title := sandbox.ApproveTool, tool, "opencode wants to use the tool "+tool
	switch {
	case tool == "bash" && in.Command != "":
		kind, target, title = sandbox.ApproveCommand, in.Command, "opencode wants to run: "+in.Command
	case permissionKey(tool) == "edit" && in.FilePath != "":
		kind, target, title = sandbox.ApproveFileWrite, in.FilePath, "opencode wants to write "+in.FilePath
	case tool == "webfetch" && in.URL != "":
		kind, target, title = sandbox.ApproveNetwork, in.URL, "opencode wants to fetch "+in.URL
	}
	return event.CustomEvent(event.ApprovalRequested, event.Approval{
		ID: sandbox.ApprovalID(Name, kind, target), Kind: string(kind), Target: target, Title: title,
	})
}

func (t *translator) End(code int) []event.Event {
	if t.server != nil {
		return t.server.End(code)
	}
	c := code
	if code == 0 && t.errMsg == "" {
		return []event.Event{{Type: event.RunFinished, ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c}}
	}
	msg := t.errMsg
	if msg == "" {
		msg = fmt.Sprintf("opencode exited with code %d", code)
	}
	return []event.Event{{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID, Message: msg, Code: "exit", ExitCode: &c}}
}
