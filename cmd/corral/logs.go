package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newLogsCmd() *cobra.Command {
	var (
		sf     stateFlags
		asJSON bool
		from   int64
	)
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's stored events (never takes the run over)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, err := sf.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, ok, err := st.GetRun(ctx, args[0]); err != nil {
				return err
			} else if !ok {
				return fmt.Errorf("no run %q", args[0])
			}
			p := &printer{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), raw: asJSON}
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
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each event as JSON, after its sequence number")
	cmd.Flags().Int64Var(&from, "from", 0, "print the events after this sequence number")
	return cmd
}
