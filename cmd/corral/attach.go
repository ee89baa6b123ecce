package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newAttachCmd() *cobra.Command {
	var (
		sf   stateFlags
		rf   remoteFlags
		from int64
	)
	cmd := &cobra.Command{
		Use:   "attach RUN",
		Short: "Stream the rest of a run, taking it over if nobody drives it",
		Long: `Stream a run's events: by default only what comes after what is stored now
(the remainder), or from --from OFFSET (0 replays everything). When no live
process drives the run, this one takes it over: it replays the run's
journal, checks it against the stored events and delivers only what is
missing. Ctrl-C detaches again. corral exits with the run's exit code.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if from < 0 {
				return errors.New("--from must be 0 or more")
			}
			if rf.server != "" {
				c, err := rf.client()
				if err != nil {
					return err
				}
				after := from
				if !cmd.Flags().Changed("from") {
					run, err := c.Run(ctx, args[0])
					if err != nil {
						return err
					}
					after = run.LastSeq
				}
				return streamRemote(cmd, c, args[0], after)
			}
			r, st, err := sf.openRunner(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			if err := runExists(ctx, st, args[0]); err != nil {
				return err
			}
			after := from
			if !cmd.Flags().Changed("from") {
				if after, err = st.LastSeq(ctx, args[0]); err != nil {
					return err
				}
			}
			return streamRun(cmd, r, st, args[0], after, true)
		},
	}
	sf.register(cmd)
	rf.register(cmd)
	cmd.Flags().Int64Var(&from, "from", 0, "deliver the events after this sequence number (default: only new ones)")
	return cmd
}
