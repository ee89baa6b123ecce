package main

import (
	"github.com/spf13/cobra"
)

func newLogsCmd() *cobra.Command {
	var (
		sf     stateFlags
		rf     remoteFlags
		asJSON bool
		from   int64
	)
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's stored events (never takes the run over)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			p := &printer{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), raw: asJSON}
			if rf.server != "" {
				c, err := rf.client()
				if err != nil {
					return err
				}
				evs, err := c.Logs(ctx, args[0], from)
				if err != nil {
					return err
				}
				for _, e := range evs {
					if err := p.print(e); err != nil {
						return err
					}
				}
				return nil
			}
			st, err := sf.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := runExists(ctx, st, args[0]); err != nil {
				return err
			}
			evs, err := st.ReadEvents(ctx, args[0], from, 0)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if err := p.print(e); err != nil {
					return err
				}
			}
			return nil
		},
	}
	sf.register(cmd)
	rf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as JSON, after its sequence number")
	cmd.Flags().Int64Var(&from, "from", 0, "print the events after this sequence number")
	return cmd
}
