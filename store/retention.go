package store

import (
	"context"
	"encoding/json"
	"time"
)

// Retention says what the stores keep of a run once it has ended. A live
// run always has what it needs (its record, its events for delivery and
// takeover); the mode decides what is left afterwards.
type Retention string

// The retention modes.
const (
	// RetainAll keeps everything: the prompt, every event with its
	// payload, the error text. The default ("" means all).
	RetainAll Retention = "all"
	// RetainSandbox keeps what the sandbox side needs and nothing anyone
	// typed or read: the run record's ids, statuses, times and exit code,
	// and its events' types and sequence numbers with only the payload a
	// keep function passes through (ids, outcomes); the prompt, the error
	// text and every other payload are erased once the run has ended. A
	// client returning later sees that the run happened, not what was said.
	RetainSandbox Retention = "sandbox"
	// RetainNone keeps nothing of an ended run: its events and its record
	// are deleted once it has ended.
	RetainNone Retention = "none"
)

// Valid reports whether r is a mode above or "" (all).
func (r Retention) Valid() bool {
	switch r {
	case "", RetainAll, RetainSandbox, RetainNone:
		return true
	}
	return false
}

// Forgets reports whether r erases anything once a run has ended.
func (r Retention) Forgets() bool { return r == RetainSandbox || r == RetainNone }

// Forgetter applies retention to ended runs. It lives in the same store as
// the runs and their events.
type Forgetter interface {
	// ListForgettable returns ended runs whose Retention forgets (sandbox
	// or none), not forgotten yet, that finished at or before
	// finishedBefore, oldest finish first (then by ID), at most limit of
	// them (0 means no cap).
	ListForgettable(ctx context.Context, finishedBefore time.Time, limit int) ([]Run, error)
	// ForgetRun applies the run's Retention in one transaction. Sandbox:
	// Prompt and Error are cleared, each event's Data becomes keep(event)
	// (nil: no payload), the log's size is recomputed and ForgottenAt is
	// set. None: the run's events and its record are deleted. All (or ""):
	// nothing changes. A missing run is NotFound, a live one
	// FailedPrecondition; forgetting a forgotten run is a no-op (and
	// one deleted by mode none is NotFound).
	ForgetRun(ctx context.Context, runID string, keep func(Event) json.RawMessage) error
	// PruneEvents deletes the events of up to limit ended runs that
	// finished at or before finishedBefore and still have events (their
	// records stay, with LastSeq unchanged and a log size of 0), oldest
	// first, and returns how many runs it pruned.
	PruneEvents(ctx context.Context, finishedBefore time.Time, limit int) (int, error)
}
