package qemu

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

func init() {
	registry.Register(registry.Entry{
		Name:         Name,
		Summary:      "microVMs under QEMU (KVM when usable, else TCG) with memory snapshots and fork",
		Capabilities: capabilities,
		Limits: func() registry.Limits {
			cpus := float64(DefaultCPUs)
			mem := int64(DefaultMemoryMB) << 20
			return registry.Limits{Enforced: true, CPUs: &cpus, MemoryBytes: &mem,
				Text: fmt.Sprintf("%d vCPU, %d MiB memory, %d MiB workspace disk (a VM)", DefaultCPUs, DefaultMemoryMB, DefaultWorkspaceMB),
				Note: "change with corral.yaml provider.qemu cpus, memoryMB, workspaceMB or --cpus, --memory"}
		},
		Section: registry.SectionOf[Section]("provider.qemu"),
		Flags: []registry.Flag{
			{Name: "image", Usage: "local Docker image whose file system is the guest's root (default: the host's static BusyBox)"},
			{Name: "rootdir", Usage: "host directory that is the guest's root (instead of --image)"},
			{Name: "accel", Usage: "kvm, tcg or empty for auto (KVM when /dev/kvm can run the guest)"},
			{Name: "cpus", Usage: fmt.Sprintf("vCPUs per VM (default %d)", DefaultCPUs)},
			{Name: "memory", Usage: fmt.Sprintf("memory per VM in MiB (default %d)", DefaultMemoryMB)},
			{Name: "network", Usage: `"none" denies the network (no network device); default user-mode networking`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			// The flags are a section's keys: one way from them to the
			// provider (paths as given, relative to the working directory).
			s := Section{Image: v["image"], RootDir: v["rootdir"], Accel: v["accel"]}
			for _, f := range []struct {
				name string
				dst  *int
			}{{"cpus", &s.CPUs}, {"memory", &s.MemoryMB}} {
				if a := v[f.name]; a != "" {
					n, err := strconv.Atoi(a)
					if err != nil || n <= 0 {
						return nil, registry.FlagError(f.name, fmt.Errorf("want a positive integer, got %q", a))
					}
					*f.dst = n
				}
			}
			return s.Provider(registry.BuildOptions{Logger: o.Logger})
		},
		CreateOptions: func(v registry.Values) sandbox.CreateOptions {
			if v["network"] == "none" {
				return sandbox.CreateOptions{Network: sandbox.NetworkDeny}
			}
			return sandbox.CreateOptions{}
		},
	})
}

// Section is corral.yaml's provider.qemu section:
//
//	provider:
//	  name: qemu
//	  qemu: {image: node:22, cpus: 2, memoryMB: 1024}
//
// Every key is optional (see Options for the defaults).
type Section struct {
	Cache       string `yaml:"cache"`
	Kernel      string `yaml:"kernel"`
	Agent       string `yaml:"agent"`
	Image       string `yaml:"image"`
	RootDir     string `yaml:"rootDir"`
	Accel       string `yaml:"accel"`
	Machine     string `yaml:"machine"`
	CPUs        int    `yaml:"cpus"`
	MemoryMB    int    `yaml:"memoryMB"`
	WorkspaceMB int    `yaml:"workspaceMB"`
	ColdBoot    bool   `yaml:"coldBoot"`
}

// Provider builds the qemu provider the section describes; paths are
// relative to the config file.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	rel := func(p string) string {
		if p == "" {
			return ""
		}
		return o.RelPath(p)
	}
	p, err := New(Options{Cache: rel(s.Cache), Kernel: rel(s.Kernel), Agent: rel(s.Agent), Image: s.Image,
		RootDir: rel(s.RootDir), Accel: s.Accel, Machine: s.Machine, CPUs: s.CPUs, MemoryMB: s.MemoryMB,
		WorkspaceMB: s.WorkspaceMB, ColdBoot: s.ColdBoot, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

// Managed is a Provider with the registry's management interfaces.
type Managed struct{ *Provider }

var (
	_ registry.Lister         = Managed{}
	_ registry.Pruner         = Managed{}
	_ registry.SnapshotLister = Managed{}
)

// ListSandboxes lists the VMs in the cache, newest first; State is
// running or stopped (QEMU ended; Resume boots it from its disks).
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	ents, err := os.ReadDir(filepath.Join(m.cache, "vms"))
	if err != nil && !os.IsNotExist(err) {
		return nil, sandbox.Wrap(sandbox.Internal, "qemu.list", "", err)
	}
	var out []registry.Sandbox
	for _, e := range ents {
		v := m.vmFor(e.Name())
		c, err := readConfig(v.configPath())
		if err != nil {
			continue
		}
		st := "stopped"
		if v.pid() != 0 {
			st = "running"
		}
		out = append(out, registry.Sandbox{ID: c.ID, State: st, CreatedAt: c.CreatedAt, Image: m.opts.Image, Detail: c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// Prune destroys VMs and deletes snapshots created before o.OlderThan, and
// boot templates made before then (a cache: the next Create makes its
// template again; they are not listed in the report).
func (m Managed) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	var rep registry.PruneReport
	list, err := m.ListSandboxes(ctx)
	if err != nil {
		return rep, err
	}
	for _, s := range list {
		if time.Since(s.CreatedAt) < o.OlderThan || (o.KeepRunning && s.State == "running") {
			continue
		}
		rep.Sandboxes = append(rep.Sandboxes, s.ID)
		if !o.DryRun {
			if err := m.Destroy(ctx, s.ID); err != nil {
				return rep, err
			}
		}
	}
	snaps, err := m.Provider.ListSnapshots(ctx)
	if err != nil {
		return rep, err
	}
	for _, s := range snaps {
		if time.Since(s.CreatedAt) < o.OlderThan {
			continue
		}
		rep.Snapshots = append(rep.Snapshots, s.ID)
		if !o.DryRun {
			if err := m.DeleteSnapshot(ctx, s.ID); err != nil {
				return rep, err
			}
		}
	}
	if !o.DryRun {
		tdir := filepath.Join(m.cache, "templates")
		ents, _ := os.ReadDir(tdir)
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) >= o.OlderThan {
				_ = os.RemoveAll(filepath.Join(tdir, e.Name()))
			}
		}
	}
	return rep, nil
}

// ListSnapshots lists the stored snapshots, newest first.
func (m Managed) ListSnapshots(ctx context.Context) ([]registry.Snapshot, error) {
	list, err := m.Provider.ListSnapshots(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Snapshot, 0, len(list))
	for _, s := range list {
		out = append(out, registry.Snapshot{Snapshot: sandbox.Snapshot{ID: s.ID, Label: s.Label, SandboxID: s.SandboxID, CreatedAt: s.CreatedAt}, Detail: s})
	}
	return out, nil
}
