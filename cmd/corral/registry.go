package main

import (
	"io"
	"os"
	"strings"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/spf13/cobra"
)

// providerFlags are the flags that choose and configure a provider: --provider
// and every registered provider's own flags (provider/registry).
type providerFlags struct {
	name   string
	values map[string]*string
}

// register binds --provider (default def) and the providers' flags.
func (f *providerFlags) register(cmd *cobra.Command, def string) {
	cmd.Flags().StringVar(&f.name, "provider", def, "sandbox provider: "+strings.Join(registry.Names(), ", "))
	f.values = map[string]*string{}
	for _, s := range registry.AllFlags() {
		v := new(string)
		f.values[s.Name] = v
		cmd.Flags().StringVar(v, s.Name, "", s.Usage)
	}
}

// given returns the provider flags set on the command line.
func (f *providerFlags) given() registry.Values {
	v := registry.Values{}
	for n, p := range f.values {
		if *p != "" {
			v[n] = *p
		}
	}
	return v
}

// open builds the provider the flags name; create is true when it will
// create sandboxes.
func (f *providerFlags) open(create bool) (sandbox.Provider, error) {
	return registry.Open(f.name, f.given(), registry.OpenOptions{Logger: logger(), Create: create, Progress: pullPrinter(os.Stderr)})
}

// createOptions are the create-time options the flags ask for.
func (f *providerFlags) createOptions() sandbox.CreateOptions {
	if e, ok := registry.Lookup(f.name); ok && e.CreateOptions != nil {
		return e.CreateOptions(f.given())
	}
	return sandbox.CreateOptions{}
}

// closeProvider closes p when it holds resources (a Docker client).
func closeProvider(p sandbox.Provider) {
	if c, ok := p.(io.Closer); ok {
		_ = c.Close()
	}
}
