package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/spf13/cobra"
)

// The sandbox commands manage corral's Docker sandboxes and snapshots
// directly (the local provider's sandboxes are directories: see
// "corral down" and the base directory).
func newSandboxCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "List, remove, snapshot, fork and prune corral's Docker sandboxes",
	}
	cmd.AddCommand(newSandboxLsCmd(), newSandboxRmCmd(), newSandboxSnapshotCmd(), newSandboxForkCmd(), newSandboxPruneCmd())
	return cmd
}

type dockerFlags struct {
	provider string
	host     string
}

func (f *dockerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.provider, "provider", docker.Name, "provider (only docker keeps a list of sandboxes)")
	cmd.Flags().StringVar(&f.host, "host", "", "Docker engine address (default: DOCKER_HOST, as the docker CLI)")
}

func (f *dockerFlags) open(ctx context.Context) (*docker.Provider, error) {
	if f.provider != docker.Name {
		return nil, fmt.Errorf("sandbox commands work with the docker provider, not %q", f.provider)
	}
	p, err := docker.New(docker.Options{Host: f.host, Logger: logger()})
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// withSandbox resumes sandbox id, runs do on it and prints what it
// returns.
func (f *dockerFlags) withSandbox(cmd *cobra.Command, id string, do func(sandbox.Handle) (string, error)) error {
	p, err := f.open(cmd.Context())
	if err != nil {
		return err
	}
	defer p.Close()
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
}

func newSandboxLsCmd() *cobra.Command {
	var (
		df     dockerFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List corral's sandboxes with id, state and age",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := df.open(cmd.Context())
			if err != nil {
				return err
			}
			defer p.Close()
			list, err := p.List(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if list == nil {
					list = []docker.Sandbox{}
				}
				return enc.Encode(list)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tIMAGE\tSTATE\tCREATED\tKEY")
			for _, s := range list {
				key := s.Key
				if key == "" {
					key = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.ID, s.Image, s.State, ago(s.CreatedAt), key)
			}
			return tw.Flush()
		},
	}
	df.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSandboxRmCmd() *cobra.Command {
	var df dockerFlags
	cmd := &cobra.Command{
		Use:   "rm ID...",
		Short: "Destroy sandboxes (containers and their anonymous volumes)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := df.open(cmd.Context())
			if err != nil {
				return err
			}
			defer p.Close()
			var errs []error
			for _, id := range args {
				if err := p.Destroy(cmd.Context(), id); err != nil {
					errs = append(errs, err)
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), id)
			}
			return errors.Join(errs...)
		},
	}
	df.register(cmd)
	return cmd
}

func newSandboxSnapshotCmd() *cobra.Command {
	var (
		df    dockerFlags
		label string
	)
	cmd := &cobra.Command{
		Use:   "snapshot ID",
		Short: "Snapshot a sandbox into a local image; prints the snapshot id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return df.withSandbox(cmd, args[0], func(h sandbox.Handle) (string, error) {
				snap, err := h.Snapshot(cmd.Context(), label)
				return snap.ID, err
			})
		},
	}
	df.register(cmd)
	cmd.Flags().StringVar(&label, "label", "", "a label kept on the snapshot")
	return cmd
}

func newSandboxForkCmd() *cobra.Command {
	var df dockerFlags
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Fork a sandbox into an independent copy; prints the fork's id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return df.withSandbox(cmd, args[0], func(h sandbox.Handle) (string, error) {
				f, err := h.Fork(cmd.Context())
				if err != nil {
					return "", err
				}
				return f.ID(), nil
			})
		},
	}
	df.register(cmd)
	return cmd
}

func newSandboxPruneCmd() *cobra.Command {
	var (
		df        dockerFlags
		olderThan time.Duration
		dryRun    bool
		keep      bool
	)
	cmd := &cobra.Command{
		Use:   "prune",
		Short: "Remove corral's containers and snapshot images older than a duration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := df.open(cmd.Context())
			if err != nil {
				return err
			}
			defer p.Close()
			rep, err := p.Prune(cmd.Context(), docker.PruneOptions{OlderThan: olderThan, DryRun: dryRun, KeepRunning: keep})
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		},
	}
	df.register(cmd)
	cmd.Flags().DurationVar(&olderThan, "older-than", 0, "only what was created longer ago than this (e.g. 24h)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would be removed")
	cmd.Flags().BoolVar(&keep, "keep-running", false, "leave running containers alone")
	return cmd
}
