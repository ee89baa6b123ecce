package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox/checkpoint"
	"github.com/d10ffeed/corral/store"
)

// newCheckpointCmd is "corral checkpoint": a thread's portable snapshots.
func newCheckpointCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "A thread's checkpoints: portable snapshots of its workspace kept in the store",
		Long: `A checkpoint is a thread's workspace (its files, empty directories, modes
and links that stay inside it; .git, node_modules, .env* and corral's own
agent files left out; secret values zeroed) and its conversation, kept in
corral's store rather than by a provider. A thread whose sandbox and native
snapshots are gone comes back from its newest checkpoint (the head), on any
provider: the next run's sandbox is created and the head restored into it.`,
	}
	cmd.AddCommand(newCheckpointLsCmd(), newCheckpointSaveCmd(), newCheckpointForkCmd(), newCheckpointRestoreCmd())
	return cmd
}

type checkpointFlags struct {
	sf     stateFlags // its --tenant is the thread's
	rf     remoteFlags
	asJSON bool
}

func (f *checkpointFlags) register(cmd *cobra.Command) {
	f.sf.register(cmd)
	f.rf.register(cmd)
	cmd.Flags().BoolVar(&f.asJSON, "json", false, "print JSON")
}

// checkpointOps are the checkpoint operations, through a runner on the
// store or through a daemon (--server).
type checkpointOps interface {
	Checkpoints(ctx context.Context, thread string) ([]store.Checkpoint, string, error)
	Save(ctx context.Context, thread, label string) (run.CheckpointResult, error)
	Fork(ctx context.Context, src, id, dst string) (store.Checkpoint, error)
	Restore(ctx context.Context, thread, id string) (checkpoint.RestoreResult, error)
}

type localCheckpoints struct {
	r      *run.Runner
	tenant string
}

func (l localCheckpoints) Checkpoints(ctx context.Context, thread string) ([]store.Checkpoint, string, error) {
	return l.r.Checkpoints(ctx, l.tenant, thread)
}

func (l localCheckpoints) Save(ctx context.Context, thread, label string) (run.CheckpointResult, error) {
	return l.r.Save(ctx, run.SaveCheckpoint{Tenant: l.tenant, Thread: thread, Label: label})
}

func (l localCheckpoints) Fork(ctx context.Context, src, id, dst string) (store.Checkpoint, error) {
	return l.r.Fork(ctx, l.tenant, src, id, dst)
}

func (l localCheckpoints) Restore(ctx context.Context, thread, id string) (checkpoint.RestoreResult, error) {
	return l.r.RestoreCheckpoint(ctx, l.tenant, thread, id, nil)
}

type remoteCheckpoints struct{ c *client.Client }

func (r remoteCheckpoints) Checkpoints(ctx context.Context, thread string) ([]store.Checkpoint, string, error) {
	return r.c.Checkpoints(ctx, thread)
}

func (r remoteCheckpoints) Save(ctx context.Context, thread, label string) (run.CheckpointResult, error) {
	cp, err := r.c.SaveCheckpoint(ctx, thread, label)
	return run.CheckpointResult{Checkpoint: cp}, err
}

func (r remoteCheckpoints) Fork(ctx context.Context, src, id, dst string) (store.Checkpoint, error) {
	return r.c.Fork(ctx, src, id, dst)
}

func (r remoteCheckpoints) Restore(ctx context.Context, thread, id string) (checkpoint.RestoreResult, error) {
	m, err := r.c.RestoreCheckpoint(ctx, thread, id)
	return checkpoint.RestoreResult{Removed: m["removed"], Dirs: m["dirs"], Files: m["files"], Symlinks: m["symlinks"], Chmods: m["chmods"]}, err
}

// with calls fn with the checkpoint operations: a daemon's with --server
// (its token names the tenant), else a runner on the store, closed after.
func (f *checkpointFlags) with(cmd *cobra.Command, fn func(ctx context.Context, ops checkpointOps) error) error {
	ctx := cmd.Context()
	if f.rf.server != "" {
		c, err := f.rf.client()
		if err != nil {
			return err
		}
		return fn(ctx, remoteCheckpoints{c})
	}
	r, st, err := f.sf.openRunner(ctx, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer st.Close()
	defer r.Close(context.WithoutCancel(ctx))
	return fn(ctx, localCheckpoints{r, f.sf.tenant})
}

func newCheckpointLsCmd() *cobra.Command {
	var f checkpointFlags
	cmd := &cobra.Command{
		Use:   "ls THREAD",
		Short: "List a thread's checkpoints, oldest first; * marks the head",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, func(ctx context.Context, ops checkpointOps) error {
				cps, head, err := ops.Checkpoints(ctx, args[0])
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if f.asJSON {
					type item struct {
						store.Checkpoint
						Head bool `json:"head"`
					}
					items := make([]item, len(cps))
					for i, cp := range cps {
						cp.Entries = nil
						items[i] = item{cp, cp.ID == head}
					}
					return printJSON(cmd, items)
				}
				if len(cps) == 0 {
					fmt.Fprintf(out, "thread %s has no checkpoints\n", args[0])
					return nil
				}
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "\tID\tREASON\tLABEL\tCREATED\tFILES\tBYTES\tRUN")
				for _, cp := range cps {
					mark := ""
					if cp.ID == head {
						mark = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", mark, cp.ID, cp.Reason, cp.Label,
						cp.CreatedAt.Local().Format(time.DateTime), len(cp.Entries), cp.Bytes, cp.SourceRunID)
				}
				return tw.Flush()
			})
		},
	}
	f.register(cmd)
	return cmd
}

func newCheckpointSaveCmd() *cobra.Command {
	var (
		f     checkpointFlags
		label string
	)
	cmd := &cobra.Command{
		Use:   "save THREAD [--label L]",
		Short: "Capture the thread's live sandbox as its new head checkpoint",
		Long: `Capture the workspace of the thread's live sandbox (never making one) and
publish it as the thread's new head. Refused while a run of the thread is
live, and while another process writes the thread's checkpoints.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, func(ctx context.Context, ops checkpointOps) error {
				res, err := ops.Save(ctx, args[0], label)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				if f.asJSON {
					res.Checkpoint.Entries = nil
					return printJSON(cmd, res)
				}
				cp := res.Checkpoint
				fmt.Fprintf(out, "%s\n", cp.ID)
				if len(cp.Entries) > 0 { // a daemon's answer has no entries
					fmt.Fprintf(cmd.ErrOrStderr(), "corral: checkpoint %s of thread %s: %d entries, %d bytes (%d new blobs)\n",
						cp.ID, cp.ThreadID, len(cp.Entries), cp.Bytes, res.BlobsPut)
				} else {
					fmt.Fprintf(cmd.ErrOrStderr(), "corral: checkpoint %s of thread %s: %d bytes\n", cp.ID, cp.ThreadID, cp.Bytes)
				}
				for _, s := range res.Skipped {
					fmt.Fprintf(cmd.ErrOrStderr(), "corral:   skipped %s: %s\n", s.Path, s.Reason)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&label, "label", "", "a name for the checkpoint")
	return cmd
}

func newCheckpointForkCmd() *cobra.Command {
	var (
		f        checkpointFlags
		from, to string
	)
	cmd := &cobra.Command{
		Use:   "fork THREAD [--checkpoint ID] [--to NEW-THREAD]",
		Short: "Start a new thread from one of THREAD's checkpoints (its head by default)",
		Long: `Make a new thread whose only checkpoint is a copy of one of THREAD's
(its head by default). Its first run gets a sandbox made from the
checkpoint. THREAD is not changed. Prints the new thread's id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, func(ctx context.Context, ops checkpointOps) error {
				cp, err := ops.Fork(ctx, args[0], from, to)
				if err != nil {
					return err
				}
				if f.asJSON {
					cp.Entries = nil
					return printJSON(cmd, cp)
				}
				fmt.Fprintln(cmd.OutOrStdout(), cp.ThreadID)
				fmt.Fprintf(cmd.ErrOrStderr(), "corral: thread %s starts from checkpoint %s of %s\n", cp.ThreadID, cp.SourceCheckpointID, cp.SourceThreadID)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&from, "checkpoint", "", "the checkpoint to fork from (default: the head)")
	cmd.Flags().StringVar(&to, "to", "", "the new thread's id (default: a fresh one)")
	return cmd
}

func newCheckpointRestoreCmd() *cobra.Command {
	var (
		f  checkpointFlags
		id string
	)
	cmd := &cobra.Command{
		Use:   "restore THREAD [--checkpoint ID]",
		Short: "Make the thread's workspace equal to one of its checkpoints (its head by default)",
		Long: `Make the workspace of the thread's sandbox equal to a checkpoint: files
and links not in it are removed, the others written, excluded paths (.git,
node_modules, .env*) left alone. The sandbox is made (from the definition
of the thread's last run) if it is gone. The whole checkpoint is checked
before anything is written: a bad or hostile one changes nothing. Refused
while a run of the thread is live.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.with(cmd, func(ctx context.Context, ops checkpointOps) error {
				res, err := ops.Restore(ctx, args[0], id)
				if err != nil {
					return err
				}
				if f.asJSON {
					return printJSON(cmd, res)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "restored: %d files, %d directories, %d links written, %d removed\n",
					res.Files, res.Dirs, res.Symlinks, res.Removed)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&id, "checkpoint", "", "the checkpoint (default: the head)")
	return cmd
}
