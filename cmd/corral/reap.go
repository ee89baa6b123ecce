package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/d10ffeed/corral/run"
	"github.com/spf13/cobra"
)

func newReapCmd() *cobra.Command {
	var (
		sf       stateFlags
		ttl      time.Duration
		max      int
		asJSON   bool
		maxAge   time.Duration
		ckKeep   int
		ckMaxAge time.Duration
	)
	cmd := &cobra.Command{
		Use:   "reap",
		Short: "Finalize finished detached runs, expire abandoned ones, reclaim idle sandboxes, apply retention",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, st, err := sf.openRunner(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			defer r.Close(context.WithoutCancel(ctx))
			rep, err := r.Reap(ctx, run.ReapOptions{TTL: ttl, MaxRuns: max})
			if err != nil {
				return err
			}
			frep, err := r.Forget(ctx, run.ForgetOptions{EventMaxAge: maxAge, CheckpointKeep: ckKeep, CheckpointMaxAge: ckMaxAge})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					run.ReapReport
					Retention run.ForgetReport `json:"retention"`
				}{rep, frep})
			}
			if frep.Forgotten+frep.Pruned+frep.Failed > 0 {
				fmt.Fprintf(out, "retention: %d ended runs forgotten, %d runs' old events deleted, %d failed\n", frep.Forgotten, frep.Pruned, frep.Failed)
			}
			if frep.CheckpointsPruned+frep.BlobsSwept > 0 {
				fmt.Fprintf(out, "retention: %d checkpoints pruned, %d unreferenced blobs swept\n", frep.CheckpointsPruned, frep.BlobsSwept)
			}
			if rep.Skipped {
				fmt.Fprintln(out, "another process is reaping; skipped")
				return nil
			}
			for _, o := range rep.Runs {
				line := fmt.Sprintf("%s %s", o.RunID, o.Outcome)
				if o.Status != "" {
					line += " (" + string(o.Status) + ")"
				}
				if o.Error != "" {
					line += ": " + o.Error
				}
				fmt.Fprintln(out, line)
			}
			fmt.Fprintf(out, "%d runs looked at; %d finalized, %d expired; %d idle sandboxes reclaimed\n",
				len(rep.Runs), rep.Count(run.ReapFinalized), rep.Count(run.ReapExpired), rep.Idle)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "cancel runs detached longer than this (0: never)")
	cmd.Flags().IntVar(&max, "max", 25, "most runs to look at")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().DurationVar(&maxAge, "event-max-age", 0, "delete the events of runs that ended longer ago than this (0: keep them)")
	checkpointRetentionFlags(cmd, &ckKeep, &ckMaxAge)
	return cmd
}

// checkpointRetentionFlags registers the daemon defaults of checkpoint
// retention (a definition's lifecycle.checkpointKeep and
// lifecycle.checkpointMaxAge win over them).
func checkpointRetentionFlags(cmd *cobra.Command, keep *int, maxAge *time.Duration) {
	cmd.Flags().IntVar(keep, "checkpoint-keep", 0, "keep the newest N checkpoints of each thread, and its head (0: keep all; a definition's lifecycle.checkpointKeep wins)")
	cmd.Flags().DurationVar(maxAge, "checkpoint-max-age", 0, "delete checkpoints older than this, never a thread's head (0: keep them; a definition's lifecycle.checkpointMaxAge wins)")
}
