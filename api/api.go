// Package api is the wire format of corral's HTTP API, shared by the
// daemon (package server) and its Go client (package client): request and
// response bodies, and the one table that maps corral's error codes to
// HTTP statuses and back.
package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// StartRun is the body of POST /v1/runs.
type StartRun struct {
	Definition string   `json:"definition,omitempty"` // default: the daemon's only (or "default") definition
	Thread     string   `json:"thread,omitempty"`     // default: a new thread
	Harness    string   `json:"harness,omitempty"`    // default: "command"
	Prompt     string   `json:"prompt,omitempty"`
	Args       []string `json:"args,omitempty"`
	Model      string   `json:"model,omitempty"`
	// Mode is the agent's mode: Claude Code's permission mode (plan,
	// acceptEdits, …), OpenCode's agent (build, plan), an ACP session mode.
	// A harness without modes refuses one (400 naming it).
	Mode    string            `json:"mode,omitempty"`
	Auth    string            `json:"auth,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	// Approvals answers approval.requested events of the thread's earlier
	// runs: approval id → allowed.
	Approvals map[string]bool `json:"approvals,omitempty"`
	// MCPServers are MCP servers for this run only, besides the
	// definition's (names unique across both; ${secret:NAME} references
	// name the definition's secrets).
	MCPServers []sandbox.MCPServer `json:"mcpServers,omitempty"`
	// Retention asks the stores to keep less of this run once it has
	// ended: "sandbox" (no prompt, no event text) or "none" (nothing). The
	// strictest of this, the definition's and the daemon's applies.
	Retention string `json:"retention,omitempty"`
}

// Run is a run as the API shows it (its journal nonce stays private).
type Run struct {
	ID         string `json:"id"`
	Thread     string `json:"thread"`
	Definition string `json:"definition"`
	Harness    string `json:"harness"`
	// Provider names the provider of the run's sandbox definition (local,
	// docker, …); the daemon fills it in, RunFrom leaves it empty.
	Provider string `json:"provider,omitempty"`
	Status   string `json:"status"`
	// CreatedAt is when the run started (its record was made).
	CreatedAt  time.Time  `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	// DurationMS is how long a finished run took, from CreatedAt to
	// FinishedAt, in milliseconds; absent while it runs.
	DurationMS      *int64     `json:"durationMs,omitempty"`
	Error           string     `json:"error,omitempty"`
	ExitCode        *int       `json:"exitCode,omitempty"`
	SandboxKey      string     `json:"sandboxKey,omitempty"`
	DetachedSince   *time.Time `json:"detachedSince,omitempty"`
	CancelRequested *time.Time `json:"cancelRequested,omitempty"`
	DriverEpoch     int64      `json:"driverEpoch"`
	LastSeq         int64      `json:"lastSeq"`
	// PolicyUnenforced lists the rules of the run's policy that its
	// harness cannot enforce (the run's policy.unenforced event says the
	// same).
	PolicyUnenforced []event.UnenforcedRule `json:"policyUnenforced,omitempty"`
	// Prompt is the prompt the run was started with.
	Prompt string `json:"prompt,omitempty"`
}

// RunFrom converts a stored run.
func RunFrom(r store.Run, lastSeq int64) Run {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	var unenforced []event.UnenforcedRule
	if r.PolicyUnenforced != "" {
		_ = json.Unmarshal([]byte(r.PolicyUnenforced), &unenforced)
	}
	var dur *int64
	if !r.FinishedAt.IsZero() && !r.CreatedAt.IsZero() {
		ms := max(r.FinishedAt.Sub(r.CreatedAt).Milliseconds(), 0)
		dur = &ms
	}
	return Run{
		ID: r.ID, Thread: r.ThreadID, Definition: r.DefinitionID, Harness: r.Harness, Status: string(r.Status),
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, FinishedAt: opt(r.FinishedAt), DurationMS: dur, Error: r.Error, ExitCode: r.ExitCode,
		SandboxKey: r.SandboxKey, DetachedSince: opt(r.DetachedSince), CancelRequested: opt(r.CancelRequested),
		DriverEpoch: r.DriverEpoch, LastSeq: lastSeq, PolicyUnenforced: unenforced, Prompt: r.Prompt,
	}
}

// Runs is the body of GET /v1/runs.
type Runs struct {
	Runs []Run `json:"runs"`
}

// Sandbox is a sandbox instance as the API shows it.
type Sandbox struct {
	Key               string `json:"key"`
	Provider          string `json:"provider"`
	ProviderSandboxID string `json:"providerSandboxId,omitempty"`
	Thread            string `json:"thread"`
	Definition        string `json:"definition,omitempty"`
	LatestSnapshotID  string `json:"latestSnapshotId,omitempty"`
	LatestRunID       string `json:"latestRunId,omitempty"`
	// State is "busy" (a run that is not over uses it: RunningRunID),
	// "idle" (it exists, no run uses it) or "reclaimed" (only its snapshot,
	// if any, is left); the daemon fills it in, SandboxFrom leaves it empty.
	State        string    `json:"state,omitempty"`
	RunningRunID string    `json:"runningRunId,omitempty"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
}

// SandboxFrom converts a stored instance.
func SandboxFrom(in store.Instance) Sandbox {
	return Sandbox{Key: in.Key, Provider: in.Provider, ProviderSandboxID: in.ProviderSandboxID, Thread: in.ThreadID,
		Definition: in.DefinitionID, LatestSnapshotID: in.LatestSnapshotID, LatestRunID: in.LatestRunID,
		CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt}
}

// Sandboxes is the body of GET /v1/sandboxes.
type Sandboxes struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// Definitions is the body of GET /v1/definitions.
type Definitions struct {
	Definitions []string `json:"definitions"`
	Harnesses   []string `json:"harnesses"`
}

// Error is the body of every error response.
type Error struct {
	Code    string `json:"code"`    // one of sandbox's codes, e.g. "NotFound"
	Message string `json:"message"` // for a person
}

var statusOf = map[sandbox.Code]int{
	sandbox.OK:                 http.StatusOK,
	sandbox.Unknown:            http.StatusInternalServerError,
	sandbox.NotFound:           http.StatusNotFound,
	sandbox.AlreadyExists:      http.StatusConflict,
	sandbox.InvalidArgument:    http.StatusBadRequest,
	sandbox.FailedPrecondition: http.StatusPreconditionFailed,
	sandbox.PermissionDenied:   http.StatusForbidden,
	sandbox.Unimplemented:      http.StatusNotImplemented,
	sandbox.Unavailable:        http.StatusServiceUnavailable,
	sandbox.ResourceExhausted:  http.StatusTooManyRequests,
	sandbox.Canceled:           499, // client closed request
	sandbox.DeadlineExceeded:   http.StatusGatewayTimeout,
	sandbox.Internal:           http.StatusInternalServerError,
}

// HTTPStatus returns the status for a code.
func HTTPStatus(c sandbox.Code) int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// CodeOf returns the code carried by an error body, falling back to the
// status when the body names none.
func CodeOf(status int, body Error) sandbox.Code {
	if c, ok := sandbox.ParseCode(body.Code); ok {
		return c
	}
	switch status {
	case http.StatusUnauthorized:
		return sandbox.PermissionDenied
	case http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return sandbox.InvalidArgument
	}
	for c, s := range statusOf {
		if s == status && c != sandbox.Unknown {
			return c
		}
	}
	return sandbox.Unknown
}

// SaveCheckpoint is the body of POST /v1/threads/{thread}/checkpoints.
type SaveCheckpoint struct {
	// Label names the checkpoint; optional.
	Label string `json:"label,omitempty"`
}

// ForkThread is the body of POST /v1/threads/{thread}/fork.
type ForkThread struct {
	// Checkpoint is the checkpoint to fork from; empty is the head.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Thread is the new thread's id; empty mints one.
	Thread string `json:"thread,omitempty"`
}

// RestoreCheckpoint is the body of POST /v1/threads/{thread}/restore.
type RestoreCheckpoint struct {
	// Checkpoint is the checkpoint to restore; empty is the head.
	Checkpoint string `json:"checkpoint,omitempty"`
}
