package run

import (
	"context"
	"encoding/json"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
)

// Strictest returns the retention mode that keeps least of those given:
// none before sandbox before all ("" counts as all).
func Strictest(modes ...store.Retention) store.Retention {
	out := store.Retention("")
	rank := func(m store.Retention) int {
		switch m {
		case store.RetainNone:
			return 2
		case store.RetainSandbox:
			return 1
		}
		return 0
	}
	for _, m := range modes {
		if rank(m) > rank(out) {
			out = m
		}
	}
	return out
}

// ForgetOptions tune a retention pass.
type ForgetOptions struct {
	// Grace is how long after its end a run keeps everything, so that the
	// clients following it read its last events before they are erased.
	// Default 2m.
	Grace time.Duration
	// EventMaxAge, when positive, deletes the events of every run (of any
	// retention mode) that ended longer ago than this; the run records
	// stay. Zero keeps events for ever.
	EventMaxAge time.Duration
	// MaxRuns bounds the runs one pass forgets or prunes, and the threads
	// whose checkpoints it prunes. Default 200.
	MaxRuns int
	// CheckpointKeep, when positive, keeps the newest CheckpointKeep
	// checkpoints of each thread (and its head), for the threads whose
	// definition sets no CheckpointKeep of its own.
	CheckpointKeep int
	// CheckpointMaxAge, when positive, prunes the checkpoints older than
	// this (never a head), for the threads whose definition sets no
	// CheckpointMaxAge of its own.
	CheckpointMaxAge time.Duration
	// BlobSweepInterval is how often this process sweeps the blobs no
	// checkpoint references (store.BlobSweep). Default 1h; negative never.
	BlobSweepInterval time.Duration
}

// ForgetReport says what a retention pass did.
type ForgetReport struct {
	// Skipped is true when another process held the retention lock.
	Skipped bool `json:"skipped,omitempty"`
	// Forgotten counts the runs whose retention mode was applied.
	Forgotten int `json:"forgotten"`
	// Pruned counts the runs whose events EventMaxAge deleted.
	Pruned int `json:"pruned"`
	// Failed counts the runs that could not be forgotten (logged).
	Failed int `json:"failed"`
	// CheckpointsPruned counts the checkpoints deleted by the keep and
	// max-age rules; BlobsSwept the blobs deleted because no checkpoint
	// referenced them.
	CheckpointsPruned int `json:"checkpointsPruned"`
	BlobsSwept        int `json:"blobsSwept"`
}

// Forget applies retention to ended runs: each run whose mode forgets
// (sandbox or none) and that ended more than Grace ago loses what its mode
// does not keep, and with EventMaxAge the events of old runs are deleted;
// then checkpoints past their keep and max-age rules are pruned and, every
// BlobSweepInterval, the blobs no checkpoint references are swept.
// One pass runs at a time across every process sharing the store.
func (r *Runner) Forget(ctx context.Context, opts ForgetOptions) (ForgetReport, error) {
	if opts.Grace <= 0 {
		opts.Grace = 2 * time.Minute
	}
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = 200
	}
	lease, ok, err := r.store.TryLock(ctx, "corral-retention", time.Minute)
	if err != nil {
		return ForgetReport{}, err
	}
	if !ok {
		return ForgetReport{Skipped: true}, nil
	}
	defer func() { _ = lease.Release(context.WithoutCancel(ctx)) }()
	var rep ForgetReport
	now := r.opts.Now()
	runs, err := r.store.ListForgettable(ctx, now.Add(-opts.Grace), opts.MaxRuns)
	if err != nil {
		return rep, err
	}
	for _, run := range runs {
		if err := r.store.ForgetRun(ctx, run.ID, KeptPayload); err != nil {
			rep.Failed++
			r.log.Warn("run: forgetting an ended run failed", "run", run.ID, "retention", run.Retention, "err", err)
			continue
		}
		rep.Forgotten++
	}
	if opts.EventMaxAge > 0 {
		n, err := r.store.PruneEvents(ctx, now.Add(-opts.EventMaxAge), opts.MaxRuns)
		if err != nil {
			return rep, err
		}
		rep.Pruned = n
	}
	rep.CheckpointsPruned = r.pruneCheckpoints(ctx, now, opts)
	if opts.BlobSweepInterval == 0 {
		opts.BlobSweepInterval = time.Hour
	}
	r.mu.Lock()
	due := opts.BlobSweepInterval > 0 && (r.lastSweep.IsZero() || !now.Before(r.lastSweep.Add(opts.BlobSweepInterval)))
	if due {
		r.lastSweep = now
	}
	r.mu.Unlock()
	if due {
		n, err := r.SweepBlobs(ctx)
		rep.BlobsSwept = n
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// keptFields are the fields of an event's payload that hold ids, names
// and codes, never what anyone typed or an agent wrote.
var keptFields = []string{"type", "threadId", "runId", "messageId", "parentMessageId", "toolCallId", "toolCallName", "stepName", "role", "code", "name", "timestamp"}

// KeptPayload is what retention mode sandbox keeps of an event's payload:
// its ids, names and codes, and the whole value of the custom events that
// carry only ids (the agent's session id, which the thread's next run
// resumes) or corral's own policy notice. nil keeps nothing.
func KeptPayload(e store.Event) json.RawMessage {
	var fields map[string]json.RawMessage
	if len(e.Data) == 0 || json.Unmarshal(e.Data, &fields) != nil {
		return nil
	}
	if e.Type == string(event.Custom) {
		var name string
		_ = json.Unmarshal(fields["name"], &name)
		if name == event.SessionStarted || name == event.PolicyUnenforced {
			return e.Data
		}
	}
	kept := map[string]json.RawMessage{}
	for _, f := range keptFields {
		if v, ok := fields[f]; ok {
			kept[f] = v
		}
	}
	if len(kept) == 0 {
		return nil
	}
	out, err := json.Marshal(kept)
	if err != nil {
		return nil
	}
	return out
}
