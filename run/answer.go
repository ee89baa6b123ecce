package run

import (
	"context"
	"crypto/sha256"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// Answer answers an approval request of a run whose turn is still live
// and waits for it (a harness.LiveApprover with its approvalWait option:
// acp, claude-code, opencode in server mode). Any process with the run's store and definitions
// can answer, whichever process drives the run: the answer is appended to
// the run's harness.AnswersFile in its sandbox, which the waiting client
// reads. A request nobody waits for any more (it was decided by its
// deadline, or the run ended) is unaffected; answer it in the thread's
// next run (StartRequest.Approvals) instead.
func (r *Runner) Answer(ctx context.Context, runID, approvalID string, allow bool) error {
	const op = "run.answer"
	rec, ok, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if !ok {
		return sandbox.Errorf(sandbox.NotFound, op, runID, "no such run")
	}
	if rec.Status.Terminal() {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, runID, "the run has ended (%s): answer in the thread's next run", rec.Status)
	}
	h, ok := r.harnesses[rec.Harness]
	if !ok {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, runID, "unknown harness %q", rec.Harness)
	}
	if la, ok := h.(harness.LiveApprover); !ok || !la.AnswersLive() {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, runID, "the %s harness cannot take an answer during the turn: answer in the thread's next run", rec.Harness)
	}
	def, ok := r.defs[rec.DefinitionID]
	if !ok {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, runID, "unknown definition %q", rec.DefinitionID)
	}
	res, ok, err := r.ensure.EnsureExisting(ctx, def, ensure.Request{Thread: rec.ThreadID, Run: rec.ID, Tenant: rec.Tenant})
	if err != nil {
		return err
	}
	if !ok {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, runID, "the run's sandbox is gone")
	}
	paths, err := journal.PathsFor(r.opts.JournalDir, rec.ID)
	if err != nil {
		return err
	}
	return harness.AppendAnswer(ctx, res.Handle, paths.Files, answerKey(rec), harness.Answer{ID: approvalID, Allow: allow})
}

// answerKey is the key that authenticates a run's live answers
// (harness.Request.AnswerKey): derived from the run's id and journal
// nonce, which the store holds and the agent's argv and environment do
// not, so any corral process with the store can answer and the agent
// cannot forge an answer (short of reading the nonce from its journal
// wrapper's memory, the limit the journal's sentinel has too).
func answerKey(rec store.Run) []byte {
	k := sha256.Sum256([]byte("corral-answer-key\x00" + rec.ID + "\x00" + rec.JournalNonce))
	return k[:]
}
