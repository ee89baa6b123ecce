package docker

import (
	"context"
	"errors"
	"fmt"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "Docker containers on a local or remote engine",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{})
			defer p.Close()
			return p.Capabilities()
		},
		Limits:  func() registry.Limits { return limitsReport(DefaultLimits()) },
		Section: registry.SectionOf[Section]("provider.docker"),
		Flags: []registry.Flag{
			{Name: "image", Usage: "the image to run (pulled when missing, see --pull)"},
			{Name: "pull", Usage: "image pull policy: missing (default), always or never"},
			{Name: "network", Usage: `the network ("none" denies the network; default bridge)`},
			{Name: "memory", Usage: "memory limit, no swap beyond it (e.g. 512m, 4g; 0 or unlimited for none; default " + FormatBytes(DefaultMemory) + ")"},
			{Name: "cpus", Usage: fmt.Sprintf("CPU limit (e.g. 0.5, 4; 0 or unlimited for none; default %v)", DefaultCPUs)},
			{Name: "pids", Usage: fmt.Sprintf("process limit (0 or unlimited for none; default %d)", DefaultPidsLimit)},
			{Name: "host", Usage: "Docker engine address (default: DOCKER_HOST, as the docker CLI)"},
		},
		Open: openFromFlags,
		CreateOptions: func(v registry.Values) sandbox.CreateOptions {
			if v["network"] == "none" {
				return sandbox.CreateOptions{Network: sandbox.NetworkDeny}
			}
			return sandbox.CreateOptions{}
		},
	})
}

// openFromFlags builds the provider from corral's CLI flags. The result
// implements the registry's management interfaces.
func openFromFlags(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
	if o.Create && v["image"] == "" {
		return nil, errors.New("--image is required with --provider docker")
	}
	opts := Options{Image: v["image"], Host: v["host"], Logger: o.Logger, OnPull: onPull(o.Progress)}
	pull, err := ParsePullPolicy(v["pull"])
	if err != nil {
		return nil, registry.FlagError("pull", err)
	}
	opts.Pull = pull
	if n := v["network"]; n != "" && n != "none" {
		opts.Network = n
	}
	if opts.Memory, err = ParseMemory(v["memory"]); err != nil {
		return nil, registry.FlagError("memory", err)
	}
	if opts.CPUs, err = ParseCPUs(v["cpus"]); err != nil {
		return nil, registry.FlagError("cpus", err)
	}
	if opts.PidsLimit, err = ParsePids(v["pids"]); err != nil {
		return nil, registry.FlagError("pids", err)
	}
	p, err := New(opts)
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

// limitsReport is the limits row of corral providers (0 fields are none).
func limitsReport(l Limits) registry.Limits {
	r := registry.Limits{Enforced: true, Text: l.String(),
		Note: "raise or lower with corral.yaml provider.docker memory, cpus, pidsLimit or corral exec --memory, --cpus, --pids; 0 or unlimited removes a limit"}
	if l.Memory > 0 {
		r.MemoryBytes = &l.Memory
	}
	if l.CPUs > 0 {
		r.CPUs = &l.CPUs
	}
	if l.Pids > 0 {
		r.Pids = &l.Pids
	}
	return r
}

// Managed is a Provider with the registry's management interfaces
// (registry.Lister, registry.Pruner, registry.SnapshotLister,
// registry.Pinger) over List, Prune and ListSnapshots.
type Managed struct{ *Provider }

var (
	_ registry.Lister         = Managed{}
	_ registry.Pruner         = Managed{}
	_ registry.SnapshotLister = Managed{}
	_ registry.Pinger         = Managed{}
)

// ListSandboxes lists corral's containers, newest first.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, s := range list {
		out = append(out, registry.Sandbox{ID: s.ID, Key: s.Key, Image: s.Image, State: s.State, CreatedAt: s.CreatedAt, Detail: s})
	}
	return out, nil
}

// Prune removes corral's containers and snapshot images (see
// Provider.Prune).
func (m Managed) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	rep, err := m.Provider.Prune(ctx, PruneOptions{OlderThan: o.OlderThan, KeepRunning: o.KeepRunning, DryRun: o.DryRun})
	return registry.PruneReport{Sandboxes: rep.Sandboxes, Snapshots: rep.Snapshots, InUse: rep.InUse}, err
}

// ListSnapshots lists corral's snapshot and fork images, newest first.
func (m Managed) ListSnapshots(ctx context.Context) ([]registry.Snapshot, error) {
	list, err := m.Provider.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Snapshot, 0, len(list))
	for _, s := range list {
		out = append(out, registry.Snapshot{Snapshot: s.Snapshot, Detail: s})
	}
	return out, nil
}
