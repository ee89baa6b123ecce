package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/store"
	"github.com/spf13/cobra"
)

func newPsCmd() *cobra.Command {
	var (
		sf     stateFlags
		rf     remoteFlags
		all    bool
		asJSON bool
		thread string
	)
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List runs (running ones; --all for every run)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var runs []store.Run
			logSize := func(string) string { return "-" } // the event log's size, where the store is at hand
			if rf.server != "" {
				c, err := rf.client()
				if err != nil {
					return err
				}
				o := client.ListOptions{Thread: thread}
				if !all {
					o.Statuses = []string{string(store.RunRunning)}
				}
				list, err := c.Runs(ctx, o)
				if err != nil {
					return err
				}
				for i := len(list) - 1; i >= 0; i-- {
					r := list[i]
					sr := store.Run{ID: r.ID, ThreadID: r.Thread, DefinitionID: r.Definition, Harness: r.Harness, Status: store.RunStatus(r.Status),
						CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Error: r.Error, ExitCode: r.ExitCode, SandboxKey: r.SandboxKey, DriverEpoch: r.DriverEpoch}
					if r.DetachedSince != nil {
						sr.DetachedSince = *r.DetachedSince
					}
					if r.FinishedAt != nil {
						sr.FinishedAt = *r.FinishedAt
					}
					runs = append(runs, sr)
				}
			} else {
				st, err := sf.openStore(ctx)
				if err != nil {
					return err
				}
				defer st.Close()
				f := store.RunFilter{ThreadID: thread, Tenant: sf.tenant}
				if !all {
					f.Statuses = []store.RunStatus{store.RunRunning}
				}
				if runs, err = st.ListRuns(ctx, f); err != nil {
					return err
				}
				logSize = func(id string) string {
					n, err := st.LogSize(ctx, id)
					if err != nil {
						return "-"
					}
					return byteSize(n)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if runs == nil {
					runs = []store.Run{}
				}
				for i := range runs {
					runs[i].JournalNonce = "" // a secret of the run; never printed
				}
				return enc.Encode(runs)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "RUN\tTHREAD\tHARNESS\tSTATUS\tEXIT\tSTARTED\tDETACHED\tLOG")
			for _, r := range runs {
				exit := "-"
				if r.ExitCode != nil {
					exit = fmt.Sprint(*r.ExitCode)
				}
				detached := "-"
				if !r.DetachedSince.IsZero() {
					detached = ago(r.DetachedSince)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.ThreadID, r.Harness, r.Status, exit, ago(r.CreatedAt), detached, logSize(r.ID))
			}
			return tw.Flush()
		},
	}
	sf.register(cmd)
	rf.register(cmd)
	cmd.Flags().BoolVarP(&all, "all", "a", false, "include finished runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&thread, "thread", "", "only runs of this thread")
	return cmd
}

func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// byteSize prints n bytes as B, KiB, MiB or GiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%dB", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
}
