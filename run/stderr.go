package run

import (
	"context"
	"strings"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
)

// MaxStderr is the most Stderr returns: the end of a run's standard error.
const MaxStderr = 64 << 10

// Stderr returns the end (at most max bytes, MaxStderr when max is 0 or
// more) of what run runID's agent wrote to its standard error, read from
// the journal's sidecar in the run's sandbox, with the run's secrets
// redacted as in its events. It is for a run that goes on: the journal,
// stderr included, is removed when the run ends (a failed run keeps the
// tail of its stderr in its error), so an ended run's is "" once removed;
// a gone sandbox is NotFound (a run still starting, whose sandbox is not
// made yet, has "").
func (r *Runner) Stderr(ctx context.Context, runID string, max int) (string, error) {
	const op = "run.stderr"
	if max <= 0 || max > MaxStderr {
		max = MaxStderr
	}
	rec, ok, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", sandbox.Errorf(sandbox.NotFound, op, runID, "no such run")
	}
	def, ok := r.defs[rec.DefinitionID]
	if !ok {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, op, runID, "unknown definition %q", rec.DefinitionID)
	}
	res, ok, err := r.ensure.EnsureExisting(ctx, def, ensure.Request{Thread: rec.ThreadID, Run: rec.ID, Tenant: rec.Tenant})
	if err != nil {
		return "", err
	}
	if !ok {
		if !rec.Status.Terminal() {
			return "", nil // still starting: its sandbox is not made yet, nothing written
		}
		return "", sandbox.Errorf(sandbox.NotFound, op, runID, "the run's sandbox is gone, and its stderr with it")
	}
	paths, err := journal.PathsFor(r.opts.JournalDir, rec.ID)
	if err != nil {
		return "", err
	}
	tail, err := journal.ErrTail(ctx, res.Handle, paths, max)
	if err != nil {
		return "", err
	}
	if tail == "" {
		return "", nil
	}
	secrets := def.Workspace.SecretsOrEmpty()
	out := secrets.Redact(string(newScrubber(secrets).line([]byte(tail))))
	return strings.ToValidUTF8(out, "\uFFFD"), nil
}
