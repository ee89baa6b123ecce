package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/spf13/cobra"
)

// providerFlags are the flags that choose and configure a provider.
type providerFlags struct {
	name    string
	dir     string
	image   string
	network string
	pull    string
	// The docker limits as typed: "" keeps the provider's default.
	memory, cpus, pids string
}

func (f *providerFlags) register(cmd *cobra.Command) {
	d := docker.DefaultLimits()
	cmd.Flags().StringVar(&f.name, "provider", "local", "sandbox provider: "+strings.Join(providerNames(), ", "))
	cmd.Flags().StringVar(&f.dir, "dir", "", "local: use this existing directory as the sandbox (kept afterwards)")
	cmd.Flags().StringVar(&f.image, "image", "", "docker: the image to run")
	cmd.Flags().StringVar(&f.pull, "pull", "", "docker: image pull policy: missing (pull when absent; default), always or never")
	cmd.Flags().StringVar(&f.network, "network", "", `docker: the network ("none" denies the network; default bridge)`)
	cmd.Flags().StringVar(&f.memory, "memory", "", "docker: memory limit, no swap beyond it (e.g. 512m, 4g; 0 or unlimited for none; default "+docker.FormatBytes(d.Memory)+")")
	cmd.Flags().StringVar(&f.cpus, "cpus", "", fmt.Sprintf("docker: CPU limit (e.g. 0.5, 4; 0 or unlimited for none; default %v)", d.CPUs))
	cmd.Flags().StringVar(&f.pids, "pids", "", fmt.Sprintf("docker: process limit (0 or unlimited for none; default %d)", d.Pids))
}

// dockerLimits parses the limit flags into the provider's options.
func (f *providerFlags) dockerLimits(o *docker.Options) error {
	var err error
	if o.Memory, err = docker.ParseMemory(f.memory); err != nil {
		return fmt.Errorf("--memory: %w", err)
	}
	if o.CPUs, err = docker.ParseCPUs(f.cpus); err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	if o.PidsLimit, err = docker.ParsePids(f.pids); err != nil {
		return fmt.Errorf("--pids: %w", err)
	}
	return nil
}

// networkMode is the create-time network gate the flags ask for.
func (f *providerFlags) networkMode() sandbox.NetworkMode {
	if f.network == "none" {
		return sandbox.NetworkDeny
	}
	return sandbox.NetworkDefault
}

// providerEntry is one provider the CLI can build.
type providerEntry struct {
	summary string
	caps    func() sandbox.Capabilities
	// limits are the resource limits a sandbox gets by default.
	limits func() providerLimits
	open   func(f *providerFlags) (sandbox.Provider, error)
}

// providerLimits are a provider's default resource limits as corral
// providers reports them. A nil field is no limit.
type providerLimits struct {
	// Enforced is false for a provider that sets no limit at all.
	Enforced bool `json:"enforced"`
	// MemoryBytes includes swap: there is no swap beyond it.
	MemoryBytes *int64   `json:"memoryBytes"`
	CPUs        *float64 `json:"cpus"`
	Pids        *int64   `json:"pids"`
	// Note says how to change them, or why there are none.
	Note string `json:"note"`
}

// String is the LIMITS column of corral providers.
func (l providerLimits) String() string {
	if !l.Enforced {
		return "none"
	}
	var d docker.Limits
	if l.MemoryBytes != nil {
		d.Memory = *l.MemoryBytes
	}
	if l.CPUs != nil {
		d.CPUs = *l.CPUs
	}
	if l.Pids != nil {
		d.Pids = *l.Pids
	}
	return d.String()
}

// dockerLimitsRow reports docker limits (0 fields are none).
func dockerLimitsRow(l docker.Limits) providerLimits {
	r := providerLimits{Enforced: true, Note: "raise or lower with corral.yaml provider.docker memory, cpus, pidsLimit or corral exec --memory, --cpus, --pids; 0 or unlimited removes a limit"}
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

var providers = map[string]providerEntry{
	local.Name: {
		summary: "host processes in a directory (no isolation)",
		caps: func() sandbox.Capabilities {
			p, _ := local.New(local.Options{})
			return p.Capabilities()
		},
		limits: func() providerLimits {
			return providerLimits{Note: "no isolation and no resource limits: commands may use all the memory, CPU and processes the host gives the user"}
		},
		open: func(f *providerFlags) (sandbox.Provider, error) {
			if f.image != "" || f.network != "" || f.pull != "" || f.memory != "" || f.cpus != "" || f.pids != "" {
				return nil, fmt.Errorf("--image, --network, --pull, --memory, --cpus and --pids are for the docker provider, not %q", local.Name)
			}
			return local.New(local.Options{Dir: f.dir})
		},
	},
	docker.Name: {
		summary: "Docker containers on a local or remote engine",
		caps: func() sandbox.Capabilities {
			p, _ := docker.New(docker.Options{})
			defer p.Close()
			return p.Capabilities()
		},
		limits: func() providerLimits {
			p, _ := docker.New(docker.Options{})
			defer p.Close()
			return dockerLimitsRow(p.Limits())
		},
		open: func(f *providerFlags) (sandbox.Provider, error) {
			opts := docker.Options{Image: f.image, Logger: logger(), OnPull: pullPrinter(os.Stderr)}
			pull, err := docker.ParsePullPolicy(f.pull)
			if err != nil {
				return nil, fmt.Errorf("--pull: %w", err)
			}
			opts.Pull = pull
			if f.network != "" && f.network != "none" {
				opts.Network = f.network
			}
			if err := f.dockerLimits(&opts); err != nil {
				return nil, err
			}
			return docker.New(opts)
		},
	},
}

func providerNames() []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// openProvider builds the provider the flags name.
func openProvider(f *providerFlags) (sandbox.Provider, error) {
	e, ok := providers[f.name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (known: %s)", f.name, strings.Join(providerNames(), ", "))
	}
	if f.dir != "" && f.name != local.Name {
		return nil, fmt.Errorf("--dir is for the local provider, not %q", f.name)
	}
	return e.open(f)
}
