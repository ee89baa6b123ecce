package acp

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/d10ffeed/corral/sandbox"
)

// A run's journal holds one record per line, written by the ACP client
// (this package, on the host) through the relay in the sandbox. The
// translator reads nothing else, so everything an event needs is in a
// record: what the agent streamed (its session/update params, verbatim)
// and what the client decided (permissions, file writes, terminals).
//
// Record kinds.
const (
	recInit         = "init"          // the agent answered initialize
	recSession      = "session"       // the session the prompt runs in
	recUpdate       = "update"        // a session/update notification's params
	recPermission   = "permission"    // session/request_permission and the answer (or that it waits)
	recAnswer       = "answer"        // a waiting permission request was settled
	recFSWrite      = "fs_write"      // fs/write_text_file and the answer
	recTerminal     = "terminal"      // terminal/create and the answer
	recTerminalExit = "terminal_exit" // a terminal's command exited
	recWarning      = "warning"       // something the user should know
	recPrompt       = "prompt"        // session/prompt answered: the turn ended
	recCancel       = "cancel"        // the client sent session/cancel (the run was cancelled)
	recError        = "error"         // the session failed
	recEnd          = "end"           // the client closed the session cleanly
	recClient       = "client"        // what a client that takes the session over needs: approvalWait, approvals
	recRPC          = "rpc"           // a JSON-RPC request in flight: session/prompt (sent), session/request_permission (received)
	recReattach     = "reattach"      // another host's client took the session over
)

// Values of a session record's Warm.
const (
	warmKept    = "kept"
	warmStarted = "started"
)

// record is one journal line. Kind is under a key no ACP message uses, so a
// record is never mistaken for a protocol message.
type record struct {
	Kind string `json:"corral_acp"`

	// init
	Agent           string `json:"agent,omitempty"`
	ProtocolVersion int    `json:"protocolVersion,omitempty"`
	LoadSession     bool   `json:"loadSession,omitempty"`

	// session
	SessionID string `json:"sessionId,omitempty"`
	Resumed   bool   `json:"resumed,omitempty"`
	Previous  string `json:"previous,omitempty"` // the session asked for and not resumed
	Mode      string `json:"mode,omitempty"`     // the session mode set for the run (session/set_mode)
	Warm      string `json:"warm,omitempty"`     // a warm turn: warmKept (the kept agent had the session) or warmStarted (a new keeper)

	// update: the notification's params as the agent sent them
	Params json.RawMessage `json:"params,omitempty"`

	// permission, fs_write, terminal
	ToolCall      json.RawMessage `json:"toolCall,omitempty"` // permission: the tool call asked about
	Gate          string          `json:"gate,omitempty"`     // an approval kind, or "none"
	Target        string          `json:"target,omitempty"`
	Title         string          `json:"title,omitempty"`
	Decision      string          `json:"decision,omitempty"` // allow or deny
	ApprovalID    string          `json:"approvalId,omitempty"`
	NeedsApproval bool            `json:"needsApproval,omitempty"`
	Waiting       string          `json:"waiting,omitempty"` // permission: it waits this long for a live answer

	Until string `json:"until,omitempty"` // permission: when the wait ends (RFC 3339, UTC)

	// answer: Decision and ApprovalID, and how it was settled
	By string `json:"by,omitempty"`

	// client: the run's answers given before it started (approval id →
	// allowed); Waiting holds its approvalWait
	Approvals map[string]bool `json:"approvals,omitempty"`
	// client of a warm turn: the keeper directory and the keeper's pid
	WarmDir string `json:"warmDir,omitempty"`
	WarmPid string `json:"warmPid,omitempty"`

	// rpc: the request's method and JSON-RPC id (and, for a permission
	// request, its params in Params); update, rpc and reattach: Off is the
	// byte offset in the agent's output log (outLog) just past the line
	Method string          `json:"method,omitempty"`
	RPCID  json.RawMessage `json:"rpcId,omitempty"`
	Off    int64           `json:"off,omitempty"`

	// terminal, terminal_exit
	TerminalID string `json:"terminalId,omitempty"`
	Command    string `json:"command,omitempty"`
	Output     string `json:"output,omitempty"`
	Truncated  bool   `json:"truncated,omitempty"`
	ExitCode   *int   `json:"exitCode,omitempty"`

	// prompt
	StopReason string          `json:"stopReason,omitempty"`
	Usage      json.RawMessage `json:"usage,omitempty"`

	// warning, error; Reason also says why a session was not resumed
	Message string `json:"message,omitempty"`
	Code    string `json:"code,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// journalWriter writes records to the relay's stdin, one line each. The
// first failed write stops it: the relay is gone (the run was cancelled or
// its sandbox went away) and nothing written later could be read.
type journalWriter struct {
	mu      sync.Mutex
	w       interface{ Write([]byte) (int, error) }
	secrets sandbox.Secrets
	err     error
}

// write appends a record. Text fields and verbatim agent payloads are
// redacted of the workspace's secret values first: a journal is readable by
// anything in the sandbox and becomes events in the store.
func (j *journalWriter) write(r record) error {
	r.Message = j.secrets.Redact(r.Message)
	r.Output = j.secrets.Redact(r.Output)
	r.Command = j.secrets.Redact(r.Command)
	r.Target = j.secrets.Redact(r.Target)
	r.Title = j.secrets.Redact(r.Title)
	r.Params = redactJSON(r.Params, j.secrets)
	r.ToolCall = redactJSON(r.ToolCall, j.secrets)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if _, err := j.w.Write(b); err != nil {
		j.err = err
	}
	return j.err
}

// redactJSON replaces secret values inside the strings of a JSON document.
// A document that holds no secret is returned as it is.
func redactJSON(raw json.RawMessage, s sandbox.Secrets) json.RawMessage {
	if len(raw) == 0 || s.Len() == 0 || s.Redact(string(raw)) == string(raw) {
		return raw
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(`null`)
	}
	out, err := json.Marshal(redactValue(v, s))
	if err != nil {
		return json.RawMessage(`null`)
	}
	return out
}

func redactValue(v any, s sandbox.Secrets) any {
	switch x := v.(type) {
	case string:
		return s.Redact(x)
	case []any:
		for i := range x {
			x[i] = redactValue(x[i], s)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[s.Redact(k)] = redactValue(e, s)
		}
		return out
	}
	return v
}
