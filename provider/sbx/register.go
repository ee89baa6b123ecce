package sbx

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.sbx section:
//
//	provider:
//	  name: sbx
//	  sbx: {binary: sbx, agent: shell, template: "", cpus: 2, memory: 4g,
//	        stateDir: ~/.cache/corral/sbx, allowNetwork: [api.anthropic.com],
//	        denyNetwork: [ads.example.com]}
//
// No credential is in the file: sbx keeps its own login (`sbx login`).
type Section struct {
	Binary       string   `yaml:"binary"`
	Agent        string   `yaml:"agent"`
	Template     string   `yaml:"template"`
	CPUs         int      `yaml:"cpus"`
	Memory       string   `yaml:"memory"`
	StateDir     string   `yaml:"stateDir"`
	AllowNetwork []string `yaml:"allowNetwork"`
	DenyNetwork  []string `yaml:"denyNetwork"`
	// EgressDefaultDenied vouches that the machine's default network
	// policy is deny-all, so an egress allow-list can be enforced.
	EgressDefaultDenied bool `yaml:"egressDefaultDenied"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	state := s.StateDir
	if state != "" {
		state = o.RelPath(state)
	}
	bin := s.Binary
	if strings.ContainsRune(bin, os.PathSeparator) {
		bin = o.RelPath(bin)
	}
	p, err := New(Options{Binary: bin, Agent: s.Agent, Template: s.Template, CPUs: s.CPUs, Memory: s.Memory,
		StateDir: state, AllowNetwork: s.AllowNetwork, DenyNetwork: s.DenyNetwork,
		EgressDefaultDenied: s.EgressDefaultDenied, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

func splitList(v string) []string {
	var out []string
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "Docker Sandboxes microVMs through the sbx CLI (sbx on PATH, `sbx login`)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{StateDir: os.TempDir()})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.sbx"),
		Flags: []registry.Flag{
			{Name: "binary", Usage: "the sbx CLI (default sbx on PATH)"},
			{Name: "agent", Usage: "the sandbox type for sbx create (default shell)"},
			{Name: "template", Usage: "the container image for sbx create -t"},
			{Name: "cpus", Usage: "CPUs for the sandbox (default sbx's)"},
			{Name: "memory", Usage: "memory for the sandbox, e.g. 4g (default sbx's)"},
			{Name: "allow-network", Usage: "hosts the sandbox may reach, comma-separated (sbx policy allow network)"},
			{Name: "deny-network", Usage: "hosts the sandbox may not reach, comma-separated (sbx policy deny network)"},
			{Name: "sbx-egress-default-denied", Usage: "true: the machine's default sbx network policy is deny-all, so an egress allow-list becomes the sandbox's allow rules (default: refuse allow-lists)"},
			{Name: "network", Usage: `"none" denies the sandbox's network (sbx policy deny network "**")`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{Binary: v["binary"], Agent: v["agent"], Template: v["template"], Memory: v["memory"],
				AllowNetwork: splitList(v["allow-network"]), DenyNetwork: splitList(v["deny-network"]),
				EgressDefaultDenied: v["sbx-egress-default-denied"] == "true"}
			if c := v["cpus"]; c != "" {
				n, err := strconv.Atoi(c)
				if err != nil || n < 1 {
					return nil, registry.FlagError("cpus", fmt.Errorf("want a positive number, not %q", c))
				}
				s.CPUs = n
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

// Managed is a Provider with the registry's management interfaces.
type Managed struct{ *Provider }

var (
	_ registry.Lister = Managed{}
	_ registry.Pruner = Managed{}
	_ registry.Pinger = Managed{}
)

// ListSandboxes lists corral's sandboxes (a NamePrefix name and corral's
// record in the state directory), newest first.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.list(ctx, Name+".list")
	if err != nil {
		return nil, err
	}
	var out []registry.Sandbox
	for _, e := range list {
		if !strings.HasPrefix(e.Name, NamePrefix) {
			continue
		}
		rec, ok := m.readRecord(e.Name)
		if !ok {
			continue
		}
		out = append(out, registry.Sandbox{ID: e.Name, Key: rec.Key, Image: e.Agent, State: e.Status,
			CreatedAt: rec.Created, Detail: e})
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].CreatedAt.After(out[j-1].CreatedAt); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// Prune removes corral's sandboxes older than o.OlderThan (running ones
// too unless o.KeepRunning). sbx has no snapshots.
func (m Managed) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	list, err := m.ListSandboxes(ctx)
	if err != nil {
		return registry.PruneReport{}, err
	}
	rep := registry.PruneReport{Sandboxes: []string{}, Snapshots: []string{}}
	for _, s := range list {
		if o.OlderThan > 0 && time.Since(s.CreatedAt) < o.OlderThan {
			continue
		}
		if o.KeepRunning && s.State == "running" {
			continue
		}
		if !o.DryRun {
			if err := m.Destroy(ctx, s.ID); err != nil {
				return rep, err
			}
		}
		rep.Sandboxes = append(rep.Sandboxes, s.ID)
	}
	return rep, nil
}

// Ping checks that sbx is on PATH and answers `sbx ls --json` (logged in,
// its daemon up).
func (m Managed) Ping(ctx context.Context) error {
	if err := m.lookPath(); err != nil {
		return err
	}
	_, err := m.list(ctx, Name+".ping")
	return err
}
