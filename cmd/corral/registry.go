package main

import (
	"fmt"
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
}

func (f *providerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.name, "provider", "local", "sandbox provider: "+strings.Join(providerNames(), ", "))
	cmd.Flags().StringVar(&f.dir, "dir", "", "local: use this existing directory as the sandbox (kept afterwards)")
	cmd.Flags().StringVar(&f.image, "image", "", "docker: the image to run (must be present on the engine)")
	cmd.Flags().StringVar(&f.network, "network", "", `docker: the network ("none" denies the network; default bridge)`)
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
	open    func(f *providerFlags) (sandbox.Provider, error)
}

var providers = map[string]providerEntry{
	local.Name: {
		summary: "host processes in a directory (no isolation)",
		caps: func() sandbox.Capabilities {
			p, _ := local.New(local.Options{})
			return p.Capabilities()
		},
		open: func(f *providerFlags) (sandbox.Provider, error) {
			if f.image != "" || f.network != "" {
				return nil, fmt.Errorf("--image and --network are for the docker provider, not %q", local.Name)
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
		open: func(f *providerFlags) (sandbox.Provider, error) {
			opts := docker.Options{Image: f.image, Logger: logger()}
			if f.network != "" && f.network != "none" {
				opts.Network = f.network
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
