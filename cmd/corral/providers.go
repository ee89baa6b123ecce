package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/spf13/cobra"
)

func newProvidersCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "providers",
		Short: "List the sandbox providers this binary links, their default resource limits and capabilities",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			type row struct {
				Name         string               `json:"name"`
				Summary      string               `json:"summary"`
				Capabilities sandbox.Capabilities `json:"capabilities"`
				Limits       registry.Limits      `json:"limits"`
			}
			var rows []row
			for _, e := range registry.Entries() {
				r := row{Name: e.Name, Summary: e.Summary, Capabilities: e.Capabilities()}
				if e.Limits != nil {
					r.Limits = e.Limits()
				}
				rows = append(rows, r)
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSUMMARY\tLIMITS\tCAPABILITIES")
			for _, r := range rows {
				var on []string
				for _, c := range sandbox.CapabilityNames {
					if r.Capabilities.Has(c) {
						on = append(on, c)
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Summary, r.Limits, strings.Join(on, ","))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
