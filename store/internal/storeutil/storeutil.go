// Package storeutil holds what the store implementations share: argument
// validation, the patch and fence rules, time conversion and operation names,
// so that memory, SQLite and PostgreSQL agree by construction and the
// conformance suite checks the storage, not three copies of the rules.
package storeutil

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Operation names carried by store errors.
const (
	OpOpen           = "store.open"
	OpMigrate        = "store.migrate"
	OpClose          = "store.close"
	OpGetInstance    = "instances.get"
	OpPutInstance    = "instances.put"
	OpDeleteInstance = "instances.delete"
	OpListInstances  = "instances.list"
	OpLock           = "lock.acquire"
	OpRenew          = "lock.renew"
	OpRelease        = "lock.release"
	OpCreateRun      = "runs.create"
	OpGetRun         = "runs.get"
	OpUpdateRun      = "runs.update"
	OpClaimRun       = "runs.claim"
	OpActiveRun      = "runs.active"
	OpListRuns       = "runs.list"
	OpReclaimable    = "runs.reclaimable"
	OpAppend         = "events.append"
	OpRead           = "events.read"
	OpLastSeq        = "events.last_seq"
	OpLogSize        = "events.size"
	OpCloseLog       = "events.close"
	OpLogClosed      = "events.closed"
	OpForgettable    = "runs.forgettable"
	OpForget         = "runs.forget"
	OpPruneEvents    = "events.prune"
)

// MS converts t to epoch milliseconds.
func MS(t time.Time) int64 { return t.UnixMilli() }

// FromMS converts epoch milliseconds to a UTC time.
func FromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// NullMS is t in epoch milliseconds, or nil (SQL NULL) for the zero time.
func NullMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// NullString is s, or nil (SQL NULL) for "".
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// TimeFromNull converts a nullable epoch-millisecond column to a time; NULL
// is the zero time.
func TimeFromNull(ms *int64) time.Time {
	if ms == nil {
		return time.Time{}
	}
	return FromMS(*ms)
}

// StringFromNull converts a nullable text column; NULL is "".
func StringFromNull(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// IntFromNull converts a nullable integer column to *int; NULL is nil.
func IntFromNull(v *int64) *int {
	if v == nil {
		return nil
	}
	n := int(*v)
	return &n
}

// Now is the current time in the form stores keep it.
func Now() time.Time { return store.Millis(time.Now()) }

// ValidateLimit refuses a negative limit.
func ValidateLimit(op string, limit int) error {
	if limit < 0 {
		return sandbox.Errorf(sandbox.InvalidArgument, op, "", "limit %d is negative", limit)
	}
	return nil
}

// NormalizeInstance validates inst for PutInstance and fills UpdatedAt
// (now when zero) and truncates the times to milliseconds. CreatedAt stays
// zero when zero: the store keeps the stored one or uses UpdatedAt.
func NormalizeInstance(inst store.Instance, now time.Time) (store.Instance, error) {
	for _, f := range []struct{ name, v string }{
		{"Key", inst.Key}, {"Provider", inst.Provider},
		{"ThreadID", inst.ThreadID},
	} {
		if f.v == "" {
			return inst, sandbox.Errorf(sandbox.InvalidArgument, OpPutInstance, inst.Key, "instance %s is required", f.name)
		}
	}
	if inst.UpdatedAt.IsZero() {
		inst.UpdatedAt = now
	}
	inst.UpdatedAt = store.Millis(inst.UpdatedAt)
	inst.CreatedAt = store.Millis(inst.CreatedAt)
	return inst, nil
}

// NormalizeRun validates r for CreateRun and fills the defaults: status
// running, CreatedAt now, UpdatedAt CreatedAt; times truncated to
// milliseconds.
func NormalizeRun(r store.Run, now time.Time) (store.Run, error) {
	fail := func(format string, args ...any) (store.Run, error) {
		return r, sandbox.Errorf(sandbox.InvalidArgument, OpCreateRun, r.ID, format, args...)
	}
	switch {
	case r.ID == "":
		return fail("run ID is required")
	case r.ThreadID == "":
		return fail("run ThreadID is required")
	case r.DriverEpoch < 0:
		return fail("DriverEpoch %d is negative", r.DriverEpoch)
	}
	if r.Status == "" {
		r.Status = store.RunRunning
	}
	if !r.Status.Valid() {
		return fail("invalid run status %q", r.Status)
	}
	if !r.Retention.Valid() {
		return fail("invalid retention %q (want all, sandbox or none)", r.Retention)
	}
	if r.Retention == store.RetainAll {
		r.Retention = ""
	}
	r.ForgottenAt = time.Time{}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	r.CreatedAt = store.Millis(r.CreatedAt)
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.UpdatedAt = store.Millis(r.UpdatedAt)
	r.FinishedAt = store.Millis(r.FinishedAt)
	r.DetachedSince = store.Millis(r.DetachedSince)
	r.CancelRequested = store.Millis(r.CancelRequested)
	if r.ExitCode != nil {
		code := *r.ExitCode
		r.ExitCode = &code
	}
	return r, nil
}

// Assign is one column assignment of an UPDATE; a nil Val writes NULL.
type Assign struct {
	Col string // the column
	Val any    // the value; nil writes NULL
}

// PatchAssignments validates p and returns the column assignments it
// makes, in a fixed order, decided by each field's presence and never by its
// value. updated_at is not included.
func PatchAssignments(id string, p store.RunPatch) ([]Assign, error) {
	var out []Assign
	if p.Status.IsClear() {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, OpUpdateRun, id, "run status cannot be cleared")
	}
	if s, ok := p.Status.Value(); ok {
		if !s.Valid() {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, OpUpdateRun, id, "invalid run status %q", s)
		}
		out = append(out, Assign{"status", string(s)})
	}
	timeCol := func(col string, o store.Opt[time.Time]) {
		if o.Leave() {
			return
		}
		v, _ := o.Value()
		out = append(out, Assign{col, NullMS(v)})
	}
	stringCol := func(col string, o store.Opt[string]) {
		if o.Leave() {
			return
		}
		v, _ := o.Value()
		out = append(out, Assign{col, NullString(v)})
	}
	timeCol("finished_at", p.FinishedAt)
	stringCol("error", p.Error)
	if !p.ExitCode.Leave() {
		var val any
		if v, ok := p.ExitCode.Value(); ok {
			val = int64(v)
		}
		out = append(out, Assign{"exit_code", val})
	}
	stringCol("sandbox_key", p.SandboxKey)
	timeCol("detached_since", p.DetachedSince)
	timeCol("cancel_requested", p.CancelRequested)
	return out, nil
}

// ApplyPatch returns r with p applied (p must have passed
// PatchAssignments) and UpdatedAt set to now.
func ApplyPatch(r store.Run, p store.RunPatch, now time.Time) store.Run {
	if s, ok := p.Status.Value(); ok {
		r.Status = s
	}
	applyTime := func(dst *time.Time, o store.Opt[time.Time]) {
		if !o.Leave() {
			v, _ := o.Value()
			*dst = store.Millis(v)
		}
	}
	applyString := func(dst *string, o store.Opt[string]) {
		if !o.Leave() {
			*dst, _ = o.Value()
		}
	}
	applyTime(&r.FinishedAt, p.FinishedAt)
	applyString(&r.Error, p.Error)
	if !p.ExitCode.Leave() {
		if v, ok := p.ExitCode.Value(); ok {
			r.ExitCode = &v
		} else {
			r.ExitCode = nil
		}
	}
	applyString(&r.SandboxKey, p.SandboxKey)
	applyTime(&r.DetachedSince, p.DetachedSince)
	applyTime(&r.CancelRequested, p.CancelRequested)
	r.UpdatedAt = now
	return r
}

// CheckPatchFences applies the patch's conditions to the stored run.
func CheckPatchFences(id string, status store.RunStatus, epoch int64, p store.RunPatch) error {
	if p.IfEpoch != nil && *p.IfEpoch != epoch {
		return sandbox.Errorf(sandbox.FailedPrecondition, OpUpdateRun, id,
			"driver epoch is %d, the update expected %d (superseded)", epoch, *p.IfEpoch)
	}
	if p.IfNotTerminal && status.Terminal() {
		return sandbox.Errorf(sandbox.FailedPrecondition, OpUpdateRun, id, "run is %s (terminal)", status)
	}
	return nil
}

// CheckClaim applies ClaimRun's rules to the stored run.
func CheckClaim(id string, status store.RunStatus, epoch, expect int64) error {
	if status.Terminal() {
		return sandbox.Errorf(sandbox.FailedPrecondition, OpClaimRun, id, "run is %s (terminal): nothing to claim", status)
	}
	if epoch != expect {
		return sandbox.Errorf(sandbox.FailedPrecondition, OpClaimRun, id,
			"driver epoch is %d, the claim expected %d (claimed by someone else)", epoch, expect)
	}
	return nil
}

// RunNotFound is the error for a missing run.
func RunNotFound(op, id string) error {
	return sandbox.Errorf(sandbox.NotFound, op, id, "no such run")
}

// ValidateEvents checks an append's arguments before any storage is read.
func ValidateEvents(runID string, firstSeq int64, events []store.NewEvent) error {
	if runID == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, OpAppend, runID, "run ID is required")
	}
	if firstSeq < 1 {
		return sandbox.Errorf(sandbox.InvalidArgument, OpAppend, runID, "firstSeq %d is below 1", firstSeq)
	}
	for i, e := range events {
		if e.Type == "" {
			return sandbox.Errorf(sandbox.InvalidArgument, OpAppend, runID, "event %d (seq %d) has no Type", i, firstSeq+int64(i))
		}
		if len(e.Data) > 0 && !json.Valid(e.Data) {
			return sandbox.Errorf(sandbox.InvalidArgument, OpAppend, runID, "event %d (seq %d) Data is not valid JSON", i, firstSeq+int64(i))
		}
	}
	return nil
}

// CheckAppend applies the append fences to the run's stored state.
func CheckAppend(runID string, epoch, storedEpoch int64, closed bool, lastSeq, firstSeq int64) error {
	if epoch != storedEpoch {
		return sandbox.Errorf(sandbox.FailedPrecondition, OpAppend, runID,
			"driver epoch is %d, the writer holds %d (superseded)", storedEpoch, epoch)
	}
	if closed {
		return sandbox.Errorf(sandbox.FailedPrecondition, OpAppend, runID, "the run's event log is closed")
	}
	switch {
	case firstSeq <= lastSeq:
		return sandbox.Errorf(sandbox.AlreadyExists, OpAppend, runID,
			"seq %d is already stored (last seq %d)", firstSeq, lastSeq)
	case firstSeq > lastSeq+1:
		return sandbox.Errorf(sandbox.FailedPrecondition, OpAppend, runID,
			"seq %d would leave a gap after last seq %d", firstSeq, lastSeq)
	}
	return nil
}

// CheckClose applies CloseLog's rules: done reports a log that is already
// closed (a no-op).
func CheckClose(runID string, epoch, storedEpoch int64, closed bool) (done bool, err error) {
	if closed {
		return true, nil
	}
	if epoch != storedEpoch {
		return false, sandbox.Errorf(sandbox.FailedPrecondition, OpCloseLog, runID,
			"driver epoch is %d, the writer holds %d (superseded)", storedEpoch, epoch)
	}
	return false, nil
}

// EventTime is the stored time of an event: its own, or now.
func EventTime(t, now time.Time) time.Time {
	if t.IsZero() {
		return now
	}
	return store.Millis(t)
}

// CopyData returns a copy of a payload (nil for an empty one), so a store
// never aliases its caller's buffers.
func CopyData(d json.RawMessage) json.RawMessage {
	if len(d) == 0 {
		return nil
	}
	return append(json.RawMessage(nil), d...)
}

// ValidateLockArgs checks a lock's name and ttl.
func ValidateLockArgs(name string, ttl time.Duration) error {
	if name == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, OpLock, name, "lock name is required")
	}
	if ttl < time.Millisecond {
		return sandbox.Errorf(sandbox.InvalidArgument, OpLock, name, "lease ttl %v is below 1ms", ttl)
	}
	return nil
}

// TTLMillis is ttl in whole milliseconds, rounded up.
func TTLMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// NonTerminalStatuses lists the statuses a run can still leave.
func NonTerminalStatuses() []store.RunStatus {
	var out []store.RunStatus
	for _, s := range store.RunStatuses() {
		if !s.Terminal() {
			out = append(out, s)
		}
	}
	return out
}

// ValidateStatuses checks a filter's statuses.
func ValidateStatuses(op string, ss []store.RunStatus) error {
	for _, s := range ss {
		if !s.Valid() {
			return sandbox.Errorf(sandbox.InvalidArgument, op, "", "invalid run status %q", s)
		}
	}
	return nil
}

// WrapDB wraps a database error once with op and id. The code is the
// context's when ctx has ended (a query cut short by cancellation reads as
// Canceled or DeadlineExceeded, whatever the driver made of it), else code.
func WrapDB(ctx context.Context, code sandbox.Code, op, id string, err error) error {
	if err == nil {
		return nil
	}
	if c := sandbox.CodeOf(err); c != sandbox.Unknown {
		return sandbox.Wrap(c, op, id, err)
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		code = sandbox.Canceled
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		code = sandbox.DeadlineExceeded
	}
	return &sandbox.Error{Code: code, Op: op, ID: id, Err: err}
}

// InstanceColumns are the sandbox_instances columns ScanInstance reads, in
// order.
const InstanceColumns = `key, provider, provider_sandbox_id, latest_snapshot_id, thread_id, latest_run_id, definition_id, tenant, created_at, updated_at`

// ScanInstance reads a row of InstanceColumns.
func ScanInstance(scan func(dest ...any) error) (store.Instance, error) {
	var (
		in                                  store.Instance
		snapshot, runID, definition, tenant *string
		created, updated                    int64
	)
	if err := scan(&in.Key, &in.Provider, &in.ProviderSandboxID, &snapshot, &in.ThreadID, &runID,
		&definition, &tenant, &created, &updated); err != nil {
		return store.Instance{}, err
	}
	in.LatestSnapshotID = StringFromNull(snapshot)
	in.LatestRunID = StringFromNull(runID)
	in.DefinitionID = StringFromNull(definition)
	in.Tenant = StringFromNull(tenant)
	in.CreatedAt = FromMS(created)
	in.UpdatedAt = FromMS(updated)
	return in, nil
}

// RunColumns are the corral_runs columns ScanRun reads, in order.
const RunColumns = `id, thread_id, tenant, definition_id, harness, status, created_at, updated_at, finished_at, error, exit_code, journal_nonce, sandbox_key, detached_since, cancel_requested, driver_epoch, policy_unenforced, prompt, retention, forgotten_at`

// ScanRun reads a row of RunColumns. NULL reads back as absent, never as a
// made-up default.
func ScanRun(scan func(dest ...any) error) (store.Run, error) {
	var (
		r                                                  store.Run
		status                                             string
		definition, harness, errMsg, nonce, sandboxKey     *string
		policyUnenforced, prompt, retention                *string
		created, updated                                   int64
		finished, exitCode, detachedSince, cancelRequested *int64
		forgotten                                          *int64
	)
	if err := scan(&r.ID, &r.ThreadID, &r.Tenant, &definition, &harness, &status, &created, &updated,
		&finished, &errMsg, &exitCode, &nonce, &sandboxKey, &detachedSince, &cancelRequested, &r.DriverEpoch, &policyUnenforced, &prompt, &retention, &forgotten); err != nil {
		return store.Run{}, err
	}
	r.Status = store.RunStatus(status)
	r.DefinitionID = StringFromNull(definition)
	r.Harness = StringFromNull(harness)
	r.CreatedAt = FromMS(created)
	r.UpdatedAt = FromMS(updated)
	r.FinishedAt = TimeFromNull(finished)
	r.Error = StringFromNull(errMsg)
	r.ExitCode = IntFromNull(exitCode)
	r.JournalNonce = StringFromNull(nonce)
	r.SandboxKey = StringFromNull(sandboxKey)
	r.DetachedSince = TimeFromNull(detachedSince)
	r.CancelRequested = TimeFromNull(cancelRequested)
	r.PolicyUnenforced = StringFromNull(policyUnenforced)
	r.Prompt = StringFromNull(prompt)
	r.Retention = store.Retention(StringFromNull(retention))
	r.ForgottenAt = TimeFromNull(forgotten)
	return r, nil
}

// RunValues are the values of RunColumns for an INSERT.
func RunValues(r store.Run) []any {
	var exit any
	if r.ExitCode != nil {
		exit = int64(*r.ExitCode)
	}
	return []any{r.ID, r.ThreadID, r.Tenant, NullString(r.DefinitionID), NullString(r.Harness), string(r.Status),
		MS(r.CreatedAt), MS(r.UpdatedAt), NullMS(r.FinishedAt), NullString(r.Error), exit,
		NullString(r.JournalNonce), NullString(r.SandboxKey), NullMS(r.DetachedSince),
		NullMS(r.CancelRequested), r.DriverEpoch, NullString(r.PolicyUnenforced), NullString(r.Prompt),
		NullString(string(r.Retention)), NullMS(r.ForgottenAt)}
}

// InstanceValues are the values of InstanceColumns for an INSERT; created
// is the created_at to use for a new row.
func InstanceValues(in store.Instance, created time.Time) []any {
	return []any{in.Key, in.Provider, in.ProviderSandboxID, NullString(in.LatestSnapshotID), in.ThreadID,
		NullString(in.LatestRunID), NullString(in.DefinitionID), NullString(in.Tenant), MS(created), MS(in.UpdatedAt)}
}

// DataBytes is the sum of the events' Data lengths: what an append adds
// to a log's size.
func DataBytes(events []store.NewEvent) int64 {
	n := int64(0)
	for _, e := range events {
		n += int64(len(e.Data))
	}
	return n
}

// CheckForget says whether ForgetRun has anything to do for r: (false,
// nil) when its retention keeps everything or it was forgotten already, an
// error when it is still live.
func CheckForget(r store.Run) (bool, error) {
	if !r.Status.Terminal() {
		return false, sandbox.Errorf(sandbox.FailedPrecondition, OpForget, r.ID, "the run is %s: only an ended run is forgotten", r.Status)
	}
	return r.Retention.Forgets() && r.ForgottenAt.IsZero(), nil
}

// KeptData is keep's payload for ev, checked: nil when keep is nil or
// returns nothing, and nil too when what it returns is not valid JSON (a
// payload the store cannot read back is no payload).
func KeptData(keep func(store.Event) json.RawMessage, ev store.Event) json.RawMessage {
	if keep == nil {
		return nil
	}
	d := keep(ev)
	if len(d) == 0 || !json.Valid(d) {
		return nil
	}
	return CopyData(d)
}
