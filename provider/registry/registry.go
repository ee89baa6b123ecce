// Package registry is corral's one list of sandbox providers, the way
// store/storeurl is for stores: each provider registers itself from its own
// package (an init function in a file of that package) with its name, a
// one-line summary, its capabilities, its corral.yaml section, its CLI flags
// and its default resource limits. config and cmd/corral consume the
// registry and import no provider; a binary chooses its providers with
// blank imports in one file (cmd/corral/providers_all.go).
//
// Management operations (listing corral's sandboxes, pruning by age,
// listing snapshots) are optional interfaces a provider's management value
// implements (see manage.go); Destroy, Resume, DeleteSnapshot and the
// handles' Snapshot and Fork are in the sandbox contract already.
//
// The contract packages never import this package (internal/depcheck).
package registry

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/d10ffeed/corral/sandbox"
)

// Entry describes one provider.
type Entry struct {
	// Name is the provider's name: corral.yaml's provider.name, the key
	// of its section and the value of --provider.
	Name string
	// Summary is one line for corral providers.
	Summary string
	// Capabilities reports what the provider's sandboxes can do, without
	// reaching a backend.
	Capabilities func() sandbox.Capabilities
	// Limits reports the resource limits a sandbox gets by default; nil
	// reports none.
	Limits func() Limits
	// Section decodes the provider's corral.yaml section (provider.NAME).
	// n is nil when the file has none. Errors name the key and the line
	// (see Decode). The section is decoded when the file is parsed, even
	// when another provider is chosen.
	Section func(n *yaml.Node) (Config, error)
	// Flags are the CLI flags that configure the provider (without the
	// leading dashes); a flag's value reaches Open in Values.
	Flags []Flag
	// Open builds the provider from the CLI flags. For a value that will
	// create sandboxes (corral exec) o.Create is true; the management
	// commands open with it false.
	Open func(v Values, o OpenOptions) (sandbox.Provider, error)
	// CreateOptions, when set, gives the create-time options the flags
	// ask for (for example a network gate).
	CreateOptions func(v Values) sandbox.CreateOptions
}

// Config is a decoded corral.yaml provider section.
type Config interface {
	// Provider builds the provider the section describes.
	Provider(o BuildOptions) (sandbox.Provider, error)
}

// BuildOptions are handed to Config.Provider.
type BuildOptions struct {
	// Logger is handed to the provider.
	Logger *slog.Logger
	// Rel makes a path in the section relative to the config file's
	// directory; nil leaves paths as written.
	Rel func(string) string
	// Progress, when set, receives one line per step of slow preparation
	// the provider does (an image pull, layer by layer).
	Progress func(step string)
	// ScrubEnv names host environment variables that hold brokered
	// secrets (and the secrets' own names): a provider whose commands
	// inherit the host's environment (local) leaves them out.
	ScrubEnv []string
}

// RelPath applies o.Rel when set.
func (o BuildOptions) RelPath(p string) string {
	if o.Rel == nil {
		return p
	}
	return o.Rel(p)
}

// Flag is one CLI flag of a provider: a string flag, unset by default.
type Flag struct {
	// Name is the flag's name without dashes ("image").
	Name string
	// Usage is its help text, without the provider's name.
	Usage string
}

// Values are the provider flags given on the command line, by name; a flag
// not given is absent (or "").
type Values map[string]string

// OpenOptions tune Entry.Open.
type OpenOptions struct {
	// Logger is handed to the provider.
	Logger *slog.Logger
	// Create is true when the provider will create sandboxes (corral
	// exec), false for the management commands.
	Create bool
	// Progress is BuildOptions.Progress for providers opened from flags.
	Progress func(step string)
}

// Limits are a provider's default resource limits as corral providers
// reports them. A nil field is no limit.
type Limits struct {
	// Enforced is false for a provider that sets no limit at all.
	Enforced bool `json:"enforced"`
	// MemoryBytes includes swap: there is no swap beyond it.
	MemoryBytes *int64   `json:"memoryBytes"`
	CPUs        *float64 `json:"cpus"`
	Pids        *int64   `json:"pids"`
	// Note says how to change them, or why there are none.
	Note string `json:"note"`
	// Text is the human form of the limits (the LIMITS column).
	Text string `json:"-"`
}

// String is the LIMITS column of corral providers: "none" when nothing is
// enforced.
func (l Limits) String() string {
	if !l.Enforced {
		return "none"
	}
	return l.Text
}

var (
	mu      sync.RWMutex
	entries = map[string]Entry{}
)

// Register adds a provider. It panics on an empty or duplicate name or a
// missing Capabilities, Section or Open, as database/sql.Register does: a
// registration is a program's constant.
func Register(e Entry) {
	if e.Name == "" || e.Capabilities == nil || e.Section == nil || e.Open == nil {
		panic("registry: provider " + e.Name + " registered without a name, Capabilities, Section or Open")
	}
	seen := map[string]bool{}
	for _, f := range e.Flags {
		if f.Name == "" || f.Name == "provider" || seen[f.Name] {
			panic("registry: provider " + e.Name + ": bad or repeated flag " + f.Name)
		}
		seen[f.Name] = true
	}
	mu.Lock()
	defer mu.Unlock()
	if _, dup := entries[e.Name]; dup {
		panic("registry: provider " + e.Name + " registered twice")
	}
	entries[e.Name] = e
}

// Names lists the registered providers, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the provider registered under name.
func Lookup(name string) (Entry, bool) {
	mu.RLock()
	defer mu.RUnlock()
	e, ok := entries[name]
	return e, ok
}

// Entries returns every registered provider, sorted by name.
func Entries() []Entry {
	var out []Entry
	for _, n := range Names() {
		e, _ := Lookup(n)
		out = append(out, e)
	}
	return out
}

// Get returns the provider registered under name, or an InvalidArgument
// error that lists the known ones.
func Get(name string) (Entry, error) {
	e, ok := Lookup(name)
	if !ok {
		return Entry{}, sandbox.Errorf(sandbox.InvalidArgument, "registry", name, "unknown provider %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return e, nil
}

// FlagSpec is one CLI flag name and the providers that take it, for a
// command line that binds every provider's flags at once.
type FlagSpec struct {
	Name string
	// Usage is "docker: the image to run" (several providers' usages are
	// joined with "; ").
	Usage     string
	Providers []string
}

// AllFlags merges the flags of every registered provider, sorted by name.
func AllFlags() []FlagSpec {
	by := map[string]*FlagSpec{}
	var order []string
	for _, e := range Entries() {
		for _, f := range e.Flags {
			s := by[f.Name]
			if s == nil {
				s = &FlagSpec{Name: f.Name}
				by[f.Name] = s
				order = append(order, f.Name)
			}
			if s.Usage != "" {
				s.Usage += "; "
			}
			s.Usage += e.Name + ": " + f.Usage
			s.Providers = append(s.Providers, e.Name)
		}
	}
	sort.Strings(order)
	out := make([]FlagSpec, 0, len(order))
	for _, n := range order {
		out = append(out, *by[n])
	}
	return out
}

// Open builds provider name from the CLI flags: it refuses flags given for
// another provider, naming them and their provider. The provider is
// guarded (sandbox.Guard).
func Open(name string, v Values, o OpenOptions) (sandbox.Provider, error) {
	e, err := Get(name)
	if err != nil {
		return nil, err
	}
	own := map[string]bool{}
	for _, f := range e.Flags {
		own[f.Name] = true
	}
	var foreign []string
	owners := map[string]bool{}
	for _, s := range AllFlags() {
		if v[s.Name] != "" && !own[s.Name] {
			foreign = append(foreign, "--"+s.Name)
			for _, p := range s.Providers {
				owners[p] = true
			}
		}
	}
	if len(foreign) > 0 {
		var who []string
		for p := range owners {
			who = append(who, p)
		}
		sort.Strings(who)
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "registry", name, "%s: these flags are for the %s provider, not %q",
			strings.Join(foreign, ", "), strings.Join(who, " or "), name)
	}
	p, err := e.Open(v, o)
	if err != nil {
		return nil, err
	}
	return guard(p), nil
}

// Build builds the provider a decoded corral.yaml section describes
// (Config.Provider), guarded like Open's. It is the path config takes, so
// every provider a user gets from the registry is guarded.
func Build(c Config, o BuildOptions) (sandbox.Provider, error) {
	p, err := c.Provider(o)
	if err != nil {
		return nil, err
	}
	return guard(p), nil
}

// guard wraps a registered provider in sandbox.Guard: command validation,
// env-name checks, Timeout, OutputLimit, capability gates and one error
// wrapping are done there, not by each provider. Reach the provider's own
// type or a management interface through it with sandbox.ProviderAs or
// As; the daemon adds its decorator with a second sandbox.Guard, which
// composes instead of wrapping twice.
func guard(p sandbox.Provider) sandbox.Provider {
	if p == nil {
		return nil
	}
	return sandbox.Guard(p, sandbox.GuardOptions{})
}

// FlagError prefixes err with the flag's name, as the CLI reports a bad
// value ("--memory: bad memory limit ...").
func FlagError(flag string, err error) error {
	return fmt.Errorf("--%s: %w", flag, err)
}
