// Package event is corral's normalized event model: what a run streams to
// its clients, whichever agent produced it. The types and field names are
// those of AG-UI chunks (run started/finished/error, text messages,
// reasoning, tool calls, and named custom events), so AG-UI clients read
// them as they are.
//
// Events carry no timestamps and their ids are run-scoped and deterministic
// (see IDs): replaying a run's journal yields identical events, which is
// what lets a second host take over a run and deliver only the remainder.
package event

import (
	"encoding/json"
	"fmt"
)

// Type is an AG-UI event type.
type Type string

// Event types.
const (
	RunStarted  Type = "RUN_STARTED"
	RunFinished Type = "RUN_FINISHED"
	RunError    Type = "RUN_ERROR"

	TextMessageStart   Type = "TEXT_MESSAGE_START"
	TextMessageContent Type = "TEXT_MESSAGE_CONTENT"
	TextMessageEnd     Type = "TEXT_MESSAGE_END"

	// A reasoning span (REASONING_START … REASONING_END) holds reasoning
	// messages (REASONING_MESSAGE_START … _CONTENT … _END); corral's
	// translators open one message per span, with the span's id.
	ReasoningStart        Type = "REASONING_START"
	ReasoningMessageStart Type = "REASONING_MESSAGE_START"
	ReasoningContent      Type = "REASONING_MESSAGE_CONTENT"
	ReasoningMessageEnd   Type = "REASONING_MESSAGE_END"
	ReasoningEnd          Type = "REASONING_END"

	ToolCallStart  Type = "TOOL_CALL_START"
	ToolCallArgs   Type = "TOOL_CALL_ARGS"
	ToolCallEnd    Type = "TOOL_CALL_END"
	ToolCallResult Type = "TOOL_CALL_RESULT"

	Custom Type = "CUSTOM"
)

// Names of corral's custom events.
const (
	// FileChanged carries the run's working-tree diff (value: FileChange).
	FileChanged = "file.changed"
	// ApprovalRequested asks a person to allow an action (value: Approval).
	ApprovalRequested = "approval.requested"
	// ApprovalWaiting follows approval.requested when the request waits,
	// with the turn, for a live answer (value: {"approvalId","wait"}).
	ApprovalWaiting = "approval.waiting"
	// ApprovalAnswered says how a waiting request was settled during the
	// turn (value: ApprovalAnswer); the run then does not end interrupted
	// by it.
	ApprovalAnswered = "approval.answered"
	// SessionStarted carries the agent's session id (value: Session), so
	// the thread's next run can resume it.
	SessionStarted = "session.started"
	// PolicyUnenforced follows RUN_STARTED when the run's harness cannot
	// enforce some rules of the run's policy (value: PolicyNotice).
	PolicyUnenforced = "policy.unenforced"
	// OutputTruncated says the event log holds less than the agent wrote
	// (value: Truncation); the journal in the sandbox keeps everything.
	OutputTruncated = "output.truncated"
	// SandboxProgress is a step of the sandbox's preparation before the
	// agent starts, such as a layer of an image pull (value: the provider's
	// sandbox.ProgressStep: phase, subject, where, part, status, current,
	// total). It is not derived from the journal: a takeover's replay does
	// not check it, and a driver that takes over does not repeat it.
	SandboxProgress = "sandbox.progress"
	// EgressAttempt is one connection the run's sandbox tried through the
	// egress gateway's forward proxy under an allow-list, allowed or
	// refused (value: Egress). Like SandboxProgress it is not derived
	// from the journal: a replay does not check it.
	EgressAttempt = "egress.attempt"
)

// Egress is the value of an egress.attempt event: metadata only.
type Egress struct {
	Method  string `json:"method"`
	Host    string `json:"host"`
	Allowed bool   `json:"allowed"`
	Status  int    `json:"status"`
	Reason  string `json:"reason,omitempty"`
}

// ApprovalAnswer is the value of an approval.answered event.
type ApprovalAnswer struct {
	ApprovalID string `json:"approvalId"`
	Allowed    bool   `json:"allowed"`
	// By is how it was settled: "answer", "deadline" or "cancelled".
	By string `json:"by"`
}

// PolicyNotice is the value of a policy.unenforced event: the rules of the
// run's policy that its harness cannot enforce, and why.
type PolicyNotice struct {
	Harness string           `json:"harness"`
	Rules   []UnenforcedRule `json:"rules"`
}

// UnenforcedRule is a rule of a policy that a harness cannot (or cannot
// fully) enforce.
type UnenforcedRule struct {
	// Rule names the rule: "commands.deny", "commands.ask", "fileWrite",
	// "network" or "default".
	Rule string `json:"rule"`
	// Pattern is a command rule's pattern.
	Pattern string `json:"pattern,omitempty"`
	// Decision is what the rule decides ("deny" or "ask").
	Decision string `json:"decision"`
	// Reason says what the harness does not see or cannot stop.
	Reason string `json:"reason"`
}

// Truncation reasons.
const (
	// TruncatedCap: the run's event log reached its size cap; later text,
	// reasoning and tool-argument deltas are dropped and tool results
	// emptied, while every other event is still recorded. At most one
	// such event per run.
	TruncatedCap = "cap"
	// TruncatedLine: one journal line was longer than the runner joins for
	// a translator that takes whole lines; that line was dropped.
	TruncatedLine = "line"
)

// Truncation is the value of an output.truncated event.
type Truncation struct {
	Reason string `json:"reason"`
	// BytesKept is, for the cap, the size of what the log kept: the
	// JSON-escaped bytes of the content deltas plus the encoded size of
	// the other events.
	BytesKept int64 `json:"bytesKept,omitempty"`
	// Limit is the cap in force (reason cap).
	Limit int64 `json:"limit,omitempty"`
	// LineBytes is the length of the dropped line (reason line).
	LineBytes int64 `json:"lineBytes,omitempty"`
	// JournalOffset is where, in the run's journal, the line that was cut
	// or dropped starts: the rest of the output is there.
	JournalOffset int64 `json:"journalOffset"`
}

// FileChange is the value of a file.changed event: the run's working-tree
// change as a git patch (new, untracked files included) and the paths it
// touches.
type FileChange struct {
	Patch     string   `json:"patch"`
	Files     []string `json:"files"`
	Truncated bool     `json:"truncated,omitempty"`
	// ToolCallID names the tool call that edited Files when the event
	// comes from a harness's translator (one per editing call, Patch
	// empty); empty on the run's final diff, which the runner emits from
	// the wrapper's diff.
	ToolCallID string `json:"toolCallId,omitempty"`
}

// Session is the value of a session.started event.
type Session struct {
	ID string `json:"id"`
}

// Approval is the value of an approval.requested event.
type Approval struct {
	ID     string `json:"approvalId"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	Title  string `json:"title,omitempty"`
}

// CustomEvent returns a CUSTOM event with the value encoded as JSON.
func CustomEvent(name string, value any) Event {
	b, err := json.Marshal(value)
	if err != nil {
		panic("event: " + err.Error())
	}
	return Event{Type: Custom, Name: name, Value: b}
}

// Event is one event. Which fields are set depends on Type. Its JSON is
// AG-UI 1.0's shape (MarshalJSON in wire.go: ExitCode and IsError travel
// in "metadata"); the field tags name the AG-UI fields.
type Event struct {
	Type Type `json:"type"`

	ThreadID string `json:"threadId,omitempty"`
	RunID    string `json:"runId,omitempty"`

	MessageID string `json:"messageId,omitempty"`
	Role      string `json:"role,omitempty"`
	Delta     string `json:"delta,omitempty"`

	ToolCallID   string `json:"toolCallId,omitempty"`
	ToolCallName string `json:"toolCallName,omitempty"`
	// Content is a tool call's result (TOOL_CALL_RESULT).
	Content string `json:"content,omitempty"`
	// IsError marks a failed tool result.
	IsError bool `json:"isError,omitempty"`

	// Name and Value are a CUSTOM event's name and payload.
	Name  string          `json:"name,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`

	// Message and Code describe a RUN_ERROR.
	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`
	// ExitCode is the agent's exit code on RUN_FINISHED and RUN_ERROR.
	ExitCode *int `json:"exitCode,omitempty"`
	// Outcome says why a RUN_FINISHED run ended; nil is success.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// Outcome types of RUN_FINISHED (AG-UI 1.0).
const (
	OutcomeSuccess   = "success"
	OutcomeInterrupt = "interrupt"
	OutcomeCancelled = "cancelled"
)

// Outcome is a RUN_FINISHED event's outcome: success (the same as none),
// cancelled (a cancel request stopped the run), or interrupt (the run
// asked for approvals; the thread's next run answers them, through the
// API's approvals or AG-UI's RunAgentInput.resume).
type Outcome struct {
	Type       string      `json:"type"`
	Interrupts []Interrupt `json:"interrupts,omitempty"`
}

// Interrupt is one pending approval of an interrupt outcome: its id is the
// approval id, its reason "approval".
type Interrupt struct {
	ID         string `json:"id"`
	Reason     string `json:"reason"`
	Message    string `json:"message,omitempty"`
	ToolCallID string `json:"toolCallId,omitempty"`
}

// Terminal reports whether e ends a run.
func (e Event) Terminal() bool { return e.Type == RunFinished || e.Type == RunError }

// Cancelled reports whether e is the terminal event of a cancelled run:
// RUN_FINISHED with the cancelled outcome (or, in logs written before
// AG-UI 1.0's outcome, a RUN_ERROR of code "cancelled").
func (e Event) Cancelled() bool {
	return (e.Type == RunFinished && e.Outcome != nil && e.Outcome.Type == OutcomeCancelled) ||
		(e.Type == RunError && e.Code == "cancelled")
}

// Marshal encodes the event as JSON (see MarshalJSON).
func (e Event) Marshal() []byte {
	b, err := json.Marshal(e)
	if err != nil {
		panic("event: " + err.Error()) // every field is plain data
	}
	return b
}

// Unmarshal decodes an event.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return Event{}, fmt.Errorf("event: %w", err)
	}
	return e, nil
}

// IDs mints run-scoped, deterministic ids: the n-th id of a kind in a run
// is always the same string.
type IDs struct {
	RunID string
	n     map[string]int
}

// Next returns the next id of a kind, e.g. "<run>-msg-1".
func (g *IDs) Next(kind string) string {
	if g.n == nil {
		g.n = map[string]int{}
	}
	g.n[kind]++
	return fmt.Sprintf("%s-%s-%d", g.RunID, kind, g.n[kind])
}
