package run

import (
	"context"
	"errors"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// sweepTTL is how long a blob sweep holds the store's sweep generation;
// the sweep stops deleting after half of it (sweepWork), so that a clock
// that runs a little fast on this host still ends its deletes first.
const (
	sweepTTL  = 2 * time.Minute
	sweepWork = time.Minute
)

// pruneCheckpoints applies the keep and max-age rules to up to
// opts.MaxRuns threads, taken in turn across passes, and returns how many
// checkpoints it deleted. A thread whose writer lease is held (a capture
// is publishing) is left for a later pass; one whose last run used a
// definition this process does not have is left to a process that has it.
func (r *Runner) pruneCheckpoints(ctx context.Context, now time.Time, opts ForgetOptions) int {
	threads, err := r.store.ListCheckpointThreads(ctx)
	if err != nil || len(threads) == 0 {
		if err != nil {
			r.log.Warn("run: listing checkpoint threads failed", "err", err)
		}
		return 0
	}
	r.mu.Lock()
	start := r.pruneCursor % len(threads)
	r.pruneCursor = start + opts.MaxRuns
	r.mu.Unlock()
	pruned := 0
	for i := 0; i < opts.MaxRuns && i < len(threads); i++ {
		th := threads[(start+i)%len(threads)]
		keep, maxAge, ok := r.checkpointRules(ctx, th, opts)
		if !ok || (keep <= 0 && maxAge <= 0) {
			continue
		}
		var olderThan time.Time
		if maxAge > 0 {
			olderThan = now.Add(-maxAge)
		}
		n, err := r.pruneThread(ctx, th, keep, olderThan)
		if err != nil {
			if !errors.Is(err, store.ErrWriterConflict) {
				r.log.Warn("run: pruning checkpoints failed", "thread", th.ThreadID, "err", err)
			}
			continue
		}
		pruned += n
	}
	return pruned
}

// checkpointRules returns the keep and max-age rules of a thread: its last
// run's definition's, each defaulting to the daemon's. ok is false when
// that definition is not this process's.
func (r *Runner) checkpointRules(ctx context.Context, th store.ThreadRef, opts ForgetOptions) (keep int, maxAge time.Duration, ok bool) {
	keep, maxAge = opts.CheckpointKeep, opts.CheckpointMaxAge
	def, _, err := r.threadDefinition(ctx, th.Tenant, th.ThreadID)
	switch {
	case sandbox.CodeOf(err) == sandbox.NotFound: // no runs (a fork not yet run)
		return keep, maxAge, true
	case err != nil:
		return 0, 0, false
	}
	if def.Lifecycle.CheckpointKeep > 0 {
		keep = def.Lifecycle.CheckpointKeep
	}
	if def.Lifecycle.CheckpointMaxAge > 0 {
		maxAge = def.Lifecycle.CheckpointMaxAge
	}
	return keep, maxAge, true
}

func (r *Runner) pruneThread(ctx context.Context, th store.ThreadRef, keep int, olderThan time.Time) (int, error) {
	w, err := r.store.AcquireWriter(ctx, th.Tenant, th.ThreadID, time.Minute)
	if err != nil {
		return 0, err
	}
	defer func() { _ = r.store.ReleaseWriter(context.WithoutCancel(ctx), w) }()
	return r.store.PruneCheckpoints(ctx, th.Tenant, th.ThreadID, keep, olderThan, w)
}

// SweepBlobs deletes the blobs of the blob store that no checkpoint
// references, and returns how many it deleted. It holds the store's blob
// sweep (store.BlobSweep): one sweep at a time across every process
// sharing the store, and a capture that checked a blob this sweep may
// delete is refused at publish and captures again. It reads the references
// after the sweep began, deletes for at most a minute, and ends the sweep;
// another sweep being live is not an error (it returns 0).
func (r *Runner) SweepBlobs(ctx context.Context) (int, error) {
	sw, err := r.store.BeginBlobSweep(ctx, sweepTTL)
	if errors.Is(err, store.ErrSweepConflict) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer func() { _ = r.store.EndBlobSweep(context.WithoutCancel(ctx), sw) }()
	wctx, cancel := context.WithTimeout(ctx, sweepWork)
	defer cancel()
	refs, err := r.store.BlobReferences(wctx)
	if err != nil {
		return 0, err
	}
	live := make(map[string]bool, len(refs))
	for _, ref := range refs {
		live[ref.Digest] = true
	}
	blobs := r.blobs()
	swept, cursor := 0, ""
	for {
		page, next, err := blobs.ListBlobs(wctx, cursor, 0)
		if err != nil {
			return swept, err
		}
		for _, d := range page {
			if live[d] {
				continue
			}
			if err := wctx.Err(); err != nil {
				return swept, nil // out of time: the rest waits for the next sweep
			}
			if err := blobs.DeleteBlob(wctx, d); err != nil {
				return swept, err
			}
			swept++
		}
		if next == "" {
			return swept, nil
		}
		cursor = next
	}
}
