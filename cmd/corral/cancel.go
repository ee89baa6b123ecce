package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func newCancelCmd() *cobra.Command {
	var (
		sf   stateFlags
		rf   remoteFlags
		wait time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cancel RUN",
		Short: "Cancel a run, whichever process drives it",
		Long: `Record a cancel request on the run. Whichever process drives the run kills
the agent (or destroys its sandbox where processes cannot be killed) and
ends the run cancelled; when nobody drives it, this process does. Waits up
to --wait for the run to end.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if rf.server != "" {
				c, err := rf.client()
				if err != nil {
					return err
				}
				return cancelRemote(cmd, c, args[0], wait)
			}
			r, st, err := sf.openRunner(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			defer r.Close(context.WithoutCancel(ctx))
			if err := runExists(ctx, st, args[0]); err != nil {
				return err
			}
			rec, err := r.Cancel(ctx, args[0])
			if err != nil {
				return err
			}
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			for !rec.Status.Terminal() {
				select {
				case <-wctx.Done():
					fmt.Fprintf(cmd.OutOrStdout(), "%s cancel requested (still %s)\n", rec.ID, rec.Status)
					return nil
				case <-time.After(100 * time.Millisecond):
				}
				if rec, _, err = st.GetRun(ctx, args[0]); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", rec.ID, rec.Status)
			return nil
		},
	}
	sf.register(cmd)
	rf.register(cmd)
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the run to end")
	return cmd
}
