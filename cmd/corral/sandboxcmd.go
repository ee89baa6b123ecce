package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/spf13/cobra"
)

// The sandbox commands manage corral's sandboxes and snapshots directly,
// for every provider that implements the operation (provider/registry's
// management interfaces; rm, snapshot and fork are in the sandbox
// contract). A provider without it fails with an Unimplemented error that
// names the provider and the operation.
func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "List, remove, snapshot, fork and prune corral's sandboxes (default provider docker)",
	}
	cmd.AddCommand(newSandboxLsCmd(), newSandboxRmCmd(), newSandboxSnapshotCmd(), newSandboxForkCmd(),
		newSandboxPruneCmd(), newSandboxSnapshotsCmd(), newSandboxRmSnapshotCmd())
	return cmd
}

// manageFlags choose the provider of a sandbox command.
type manageFlags struct{ pf providerFlags }

// defaultManageProvider is the provider the sandbox commands default to.
const defaultManageProvider = "docker"

func (f *manageFlags) register(cmd *cobra.Command) { f.pf.register(cmd, defaultManageProvider) }

// open builds the provider and checks that its backend answers.
func (f *manageFlags) open(cmd *cobra.Command) (sandbox.Provider, error) {
	p, err := f.pf.open(false)
	if err != nil {
		return nil, err
	}
	var pg registry.Pinger
	if sandbox.ProviderAs(p, &pg) {
		if err := pg.Ping(cmd.Context()); err != nil {
			closeProvider(p)
			return nil, err
		}
	}
	return p, nil
}

// with opens the provider, runs do and closes it.
func (f *manageFlags) with(cmd *cobra.Command, do func(sandbox.Provider) error) error {
	p, err := f.open(cmd)
	if err != nil {
		return err
	}
	defer closeProvider(p)
	return do(p)
}

// withSandbox resumes sandbox id, runs do on it and prints what it
// returns.
func (f *manageFlags) withSandbox(cmd *cobra.Command, id string, do func(sandbox.Handle) (string, error)) error {
	return f.with(cmd, func(p sandbox.Provider) error {
		h, err := p.Resume(cmd.Context(), id)
		if err != nil {
			return err
		}
		out, err := do(h)
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), out)
		return nil
	})
}

func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newSandboxLsCmd() *cobra.Command {
	var (
		mf     manageFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List corral's sandboxes with id, state and age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mf.with(cmd, func(p sandbox.Provider) error {
				l, err := registry.As[registry.Lister](p, "listing sandboxes (corral sandbox ls)")
				if err != nil {
					return err
				}
				list, err := l.ListSandboxes(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []registry.Sandbox{}
					}
					return printJSON(cmd, list)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tIMAGE\tSTATE\tCREATED\tKEY")
				for _, s := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, dash(s.Image), s.State, ago(s.CreatedAt), dash(s.Key))
				}
				return tw.Flush()
			})
		},
	}
	mf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSandboxRmCmd() *cobra.Command {
	var mf manageFlags
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Destroy sandboxes (with the provider's Destroy: a container and its anonymous volumes, a directory)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return mf.with(cmd, func(p sandbox.Provider) error {
				var errs []error
				for _, id := range args {
					if err := p.Destroy(cmd.Context(), id); err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintln(cmd.OutOrStdout(), id)
				}
				return errors.Join(errs...)
			})
		},
	}
	mf.register(cmd)
	return cmd
}

func newSandboxSnapshotCmd() *cobra.Command {
	var (
		mf    manageFlags
		label string
	)
	cmd := &cobra.Command{
		Use:   "snapshot ID",
		Short: "Snapshot a sandbox (Docker: into a local image); prints the snapshot id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return mf.withSandbox(cmd, args[0], func(h sandbox.Handle) (string, error) {
				snap, err := h.Snapshot(cmd.Context(), label)
				return snap.ID, err
			})
		},
	}
	mf.register(cmd)
	cmd.Flags().StringVar(&label, "label", "", "a label kept on the snapshot")
	return cmd
}

func newSandboxForkCmd() *cobra.Command {
	var mf manageFlags
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Fork a sandbox into an independent copy; prints the fork's id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return mf.withSandbox(cmd, args[0], func(h sandbox.Handle) (string, error) {
				f, err := h.Fork(cmd.Context())
				if err != nil {
					return "", err
				}
				return f.ID(), nil
			})
		},
	}
	mf.register(cmd)
	return cmd
}

func newSandboxPruneCmd() *cobra.Command {
	var (
		mf        manageFlags
		olderThan time.Duration
		dryRun    bool
		keep      bool
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove corral's sandboxes and snapshots older than a duration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mf.with(cmd, func(p sandbox.Provider) error {
				pr, err := registry.As[registry.Pruner](p, "pruning (corral sandbox prune)")
				if err != nil {
					return err
				}
				rep, err := pr.Prune(cmd.Context(), registry.PruneOptions{OlderThan: olderThan, DryRun: dryRun, KeepRunning: keep})
				if err != nil {
					return err
				}
				return printJSON(cmd, rep)
			})
		},
	}
	mf.register(cmd)
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only what was created longer ago than this (e.g. 24h)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed")
	cmd.Flags().BoolVar(&keep, "keep-running", false, "leave running sandboxes alone")
	return cmd
}

func newSandboxSnapshotsCmd() *cobra.Command {
	var (
		mf     manageFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List corral's snapshots with id, label, source sandbox and age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return mf.with(cmd, func(p sandbox.Provider) error {
				l, err := registry.As[registry.SnapshotLister](p, "listing snapshots (corral sandbox snapshots)")
				if err != nil {
					return err
				}
				list, err := l.ListSnapshots(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					if list == nil {
						list = []registry.Snapshot{}
					}
					return printJSON(cmd, list)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tLABEL\tSANDBOX\tCREATED")
				for _, s := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.ID, dash(s.Label), dash(s.SandboxID), ago(s.CreatedAt))
				}
				return tw.Flush()
			})
		},
	}
	mf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSandboxRmSnapshotCmd() *cobra.Command {
	var mf manageFlags
	cmd := &cobra.Command{
		Use:   "rmsnapshot ID...",
		Short: "Delete snapshots (with the provider's DeleteSnapshot)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return mf.with(cmd, func(p sandbox.Provider) error {
				var errs []error
				for _, id := range args {
					if err := p.DeleteSnapshot(cmd.Context(), id); err != nil {
						errs = append(errs, err)
						continue
					}
					fmt.Fprintln(cmd.OutOrStdout(), id)
				}
				return errors.Join(errs...)
			})
		},
	}
	mf.register(cmd)
	return cmd
}
