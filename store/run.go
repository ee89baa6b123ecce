package store

import (
	"context"
	"time"
)

// RunStatus is the state of a run.
type RunStatus string

// The run statuses. Running is the only non-terminal one.
const (
	// RunRunning: the run is in progress, possibly detached from any client.
	RunRunning RunStatus = "running"
	// RunCompleted: the agent finished normally.
	RunCompleted RunStatus = "completed"
	// RunFailed: the agent or its sandbox failed.
	RunFailed RunStatus = "failed"
	// RunCancelled: a cancel was requested and the run was stopped.
	RunCancelled RunStatus = "cancelled"
	// RunAborted: the run was ended without a cancel request (a reaper
	// expired it, or its driver gave up).
	RunAborted RunStatus = "aborted"
)

// RunStatuses lists every valid status, the non-terminal one first.
func RunStatuses() []RunStatus {
	return []RunStatus{RunRunning, RunCompleted, RunFailed, RunCancelled, RunAborted}
}

// Valid reports whether s is one of the statuses above.
func (s RunStatus) Valid() bool {
	switch s {
	case RunRunning, RunCompleted, RunFailed, RunCancelled, RunAborted:
		return true
	}
	return false
}

// Terminal reports whether s ends the run: completed, failed, cancelled or
// aborted. An invalid status is not terminal.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunCompleted, RunFailed, RunCancelled, RunAborted:
		return true
	}
	return false
}

// Run is the record of one agent run.
//
// Optional fields are absent when they hold their zero value (an empty
// string, the zero time, a nil ExitCode); a store keeps them as SQL NULL and
// reads NULL back as the zero value, never as a made-up default.
type Run struct {
	// ID identifies the run. Required, unique.
	ID string
	// ThreadID is the conversation the run belongs to. Required.
	ThreadID string
	// Tenant scopes the run; optional ("" is the default tenant).
	Tenant string
	// DefinitionID names the agent or sandbox definition; optional.
	DefinitionID string
	// Harness names the agent harness (the CLI that runs in the sandbox);
	// optional.
	Harness string
	// Status is the run's state. CreateRun defaults it to RunRunning.
	Status RunStatus
	// CreatedAt is when the run was created. CreateRun defaults it to now.
	CreatedAt time.Time
	// UpdatedAt is set by the store on every write.
	UpdatedAt time.Time
	// FinishedAt is when the run reached a terminal status; optional.
	FinishedAt time.Time
	// Error describes why the run failed; optional.
	Error string
	// ExitCode is the agent process's exit status; nil when unknown. Zero is
	// a value (a clean exit), not an absence.
	ExitCode *int
	// JournalNonce is a per-run random secret that marks the journal's exit
	// line as written by corral's wrapper and not forged by the agent.
	JournalNonce string

	// SandboxKey is the instance key of the sandbox that keeps running while
	// the run is detached; written on detach. Optional.
	SandboxKey string
	// DetachedSince is when the last client went away while the run kept
	// going; cleared when a driver takes the run over. A non-terminal run
	// with DetachedSince set is what a reaper may reclaim. Optional.
	DetachedSince time.Time
	// CancelRequested is when a cancel was requested out of band; the zero
	// time means none was. It is a time rather than a flag so that the
	// record also says when; any non-zero value means "cancel". Sticky by
	// convention: the run flow never clears it.
	CancelRequested time.Time
	// DriverEpoch counts the claims on the run (0 before the first). Only
	// ClaimRun moves it, by one. Event appends and fenced updates from a
	// driver holding an older epoch are refused.
	DriverEpoch int64
	// PolicyUnenforced lists, as JSON (an array of event.UnenforcedRule),
	// the rules of the run's policy that its harness cannot enforce; set at
	// create and never changed, so every driver of the run opens it with
	// the same policy.unenforced event. Optional: empty when the harness
	// enforces the whole policy (or there is none).
	PolicyUnenforced string
	// Prompt is the prompt the run was started with, as given (a harness
	// run's instruction; for the command harness, the shell text), so that
	// any client can show a thread as a conversation. Set at create and
	// never changed. Optional.
	Prompt string
	// Retention says what the stores keep of the run once it has ended
	// (see [Retention]); set at create and never changed. "" is all.
	Retention Retention
	// ForgottenAt is when ForgetRun erased what the run's Retention does
	// not keep; zero until then.
	ForgottenAt time.Time
}

// RunPatch changes some fields of a run. Each Opt field is left as it is
// when zero, stored with Set and cleared with Clear. For the string and time
// fields, Set of the zero value ("" or the zero time) clears, like Clear.
// ID, ThreadID, Tenant, DefinitionID, Harness, JournalNonce,
// PolicyUnenforced, Prompt, Retention and CreatedAt never change (ForgetRun clears Prompt); DriverEpoch moves only through ClaimRun; UpdatedAt is set by
// the store.
type RunPatch struct {
	// Status sets the status. It cannot be cleared (InvalidArgument).
	Status Opt[RunStatus]
	// FinishedAt sets or clears the finish time.
	FinishedAt Opt[time.Time]
	// Error sets or clears the error message.
	Error Opt[string]
	// ExitCode sets (0 included) or clears the exit code.
	ExitCode Opt[int]
	// SandboxKey sets or clears the detached sandbox's key.
	SandboxKey Opt[string]
	// DetachedSince sets or clears the detach time.
	DetachedSince Opt[time.Time]
	// CancelRequested sets or clears the cancel request time.
	CancelRequested Opt[time.Time]

	// IfEpoch, when non-nil, makes the update conditional: it is refused
	// with FailedPrecondition unless the stored DriverEpoch equals *IfEpoch.
	IfEpoch *int64
	// IfNotTerminal makes the update conditional: it is refused with
	// FailedPrecondition when the stored status is terminal.
	IfNotTerminal bool
}

// RunFilter selects runs for ListRuns. Zero fields do not filter.
type RunFilter struct {
	// ThreadID, when set, keeps runs of that thread only.
	ThreadID string
	// Tenant, when set, keeps runs of that tenant only.
	Tenant string
	// Statuses, when not empty, keeps runs in one of these statuses.
	Statuses []RunStatus
	// UpdatedBefore, when set, keeps runs whose UpdatedAt is strictly
	// before it.
	UpdatedBefore time.Time
	// Limit caps the number of runs; 0 means no cap. Negative is invalid.
	Limit int
}

// RunStore keeps run records.
type RunStore interface {
	// CreateRun stores a new run. A run with the same ID is AlreadyExists;
	// a missing ID or ThreadID, an invalid status or a negative DriverEpoch
	// is InvalidArgument.
	CreateRun(ctx context.Context, r Run) error
	// GetRun returns the run. A missing run is (Run{}, false, nil).
	GetRun(ctx context.Context, id string) (Run, bool, error)
	// UpdateRun applies p atomically and returns the run as stored after it.
	// A missing run is NotFound; a failed IfEpoch or IfNotTerminal condition
	// is FailedPrecondition, and nothing is written then.
	UpdateRun(ctx context.Context, id string, p RunPatch) (Run, error)
	// ClaimRun moves DriverEpoch from expectEpoch to expectEpoch+1 in one
	// compare-and-swap and returns the run after it. A missing run is
	// NotFound; a run whose epoch is no longer expectEpoch, or that is
	// terminal, is FailedPrecondition.
	ClaimRun(ctx context.Context, id string, expectEpoch int64) (Run, error)
	// ActiveRun returns the newest (by CreatedAt, then ID) non-terminal run
	// of the thread in the tenant ("" is the default tenant, matched
	// exactly), or false when there is none.
	ActiveRun(ctx context.Context, threadID, tenant string) (Run, bool, error)
	// ListRuns returns the runs that match f, ordered by CreatedAt and then
	// ID, both ascending.
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// ListReclaimable returns non-terminal runs whose DetachedSince is set and
	// at or before detachedBefore (inclusive, in milliseconds), oldest
	// detach first (then by ID), at most limit of them (0 means no cap).
	ListReclaimable(ctx context.Context, detachedBefore time.Time, limit int) ([]Run, error)
}
