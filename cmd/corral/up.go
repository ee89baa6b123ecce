package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/d10ffeed/corral/sandbox/bootstrap"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/spf13/cobra"
)

func newUpCmd() *cobra.Command {
	var (
		sf     stateFlags
		thread string
	)
	cmd := &cobra.Command{
		Use:   "up --thread T",
		Short: "Ensure a thread's sandbox: resume it, restore it, or create it",
		Long: `Ensure the thread's sandbox from the definition in corral.yaml (or
--config): resume the recorded sandbox, else restore its latest snapshot,
else create and bootstrap a new one. Prints a line per setup step while it
runs, then the sandbox id and which path was taken.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if thread == "" {
				return errors.New("--thread is required")
			}
			ctx := cmd.Context()
			def, err := sf.definition()
			if err != nil {
				return err
			}
			st, err := sf.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			out := cmd.OutOrStdout()
			m := &ensure.Manager{Instances: st, Locker: st, Logger: logger(), OnStep: func(ev bootstrap.StepEvent) {
				kind := "setup"
				if ev.Parallel {
					kind = "setup (parallel)"
				}
				if !ev.Done {
					fmt.Fprintf(out, "%s %d/%d: %s\n", kind, ev.Index, ev.Total, ev.Command)
					return
				}
				verdict := "ok"
				if ev.ExitCode != 0 {
					verdict = fmt.Sprintf("failed (exit %d)", ev.ExitCode)
				}
				fmt.Fprintf(out, "%s %d/%d: %s in %s\n", kind, ev.Index, ev.Total, verdict, roundElapsed(ev.Elapsed))
			}}
			res, err := m.Ensure(ctx, def, ensure.Request{Thread: thread, Tenant: sf.tenant})
			if err != nil {
				return err
			}
			if pm := res.Bootstrap.PackageManager; pm != "" {
				fmt.Fprintf(out, "package manager: %s (detected from its lockfile; nothing was installed)\n", pm)
			}
			fmt.Fprintf(out, "%s %s\n", res.Outcome, res.Handle.ID())
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&thread, "thread", "", "the thread whose sandbox to ensure (required)")
	return cmd
}

func newDownCmd() *cobra.Command {
	var (
		sf     stateFlags
		thread string
	)
	cmd := &cobra.Command{
		Use:   "down --thread T",
		Short: "Destroy a thread's sandbox and its record",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if thread == "" {
				return errors.New("--thread is required")
			}
			ctx := cmd.Context()
			def, err := sf.definition()
			if err != nil {
				return err
			}
			st, err := sf.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			m := &ensure.Manager{Instances: st, Locker: st, Logger: logger()}
			key := def.KeyFor(thread, "", sf.tenant)
			rec, found, err := st.GetInstance(ctx, key)
			if err != nil {
				return err
			}
			if !found {
				fmt.Fprintf(cmd.OutOrStdout(), "no sandbox for thread %q\n", thread)
				return nil
			}
			if err := m.Destroy(ctx, def, ensure.Request{Thread: thread, Tenant: sf.tenant}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "destroyed %s\n", rec.ProviderSandboxID)
			return nil
		},
	}
	sf.register(cmd)
	cmd.Flags().StringVar(&thread, "thread", "", "the thread whose sandbox to destroy (required)")
	return cmd
}

func roundElapsed(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
