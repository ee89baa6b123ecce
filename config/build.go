package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// DefaultID is the definition id when the file sets none.
const DefaultID = "default"

// DefaultProvider is the provider a file that names none gets.
const DefaultProvider = "local"

// ProviderNames lists the providers a config can name: those registered
// with provider/registry.
func ProviderNames() []string { return registry.Names() }

// BuildOptions tune Definition.
type BuildOptions struct {
	// Logger is handed to the provider.
	Logger *slog.Logger
	// Getenv reads host environment variables for secrets; default
	// os.LookupEnv.
	Getenv func(string) (string, bool)
	// Progress receives the provider's preparation steps (an image pull,
	// layer by layer); nil drops them.
	Progress func(step string)
}

// Definition builds the sandbox definition the file describes, including
// its provider, and resolves secrets from the environment. Relative paths
// (source dir, local dirs) are relative to the file's directory.
func (f *File) Definition(o BuildOptions) (*sandbox.Definition, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	fail := func(format string, args ...any) error {
		return sandbox.Errorf(sandbox.InvalidArgument, "config", f.path, format, args...)
	}
	var scrub []string // where brokered values live on the host
	for name, s := range f.Workspace.Secrets {
		if s.Broker != nil {
			scrub = append(scrub, name, s.Env)
		}
	}
	sort.Strings(scrub)
	p, err := f.provider(o.Logger, o.Progress, scrub)
	if err != nil {
		return nil, err
	}
	def := &sandbox.Definition{ID: f.ID, Provider: p}
	if def.ID == "" {
		def.ID = DefaultID
	}
	w := f.Workspace
	values := map[string]string{}
	brokers := map[string]sandbox.Broker{}
	names := make([]string, 0, len(w.Secrets))
	for n := range w.Secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		s := w.Secrets[name]
		where := f.secretLine(name)
		if s.Env == "" {
			return nil, fail("%sworkspace.secrets.%s: set env: the host environment variable that holds it", where, name)
		}
		v, ok := getenv(s.Env)
		if !ok {
			return nil, fail("%sworkspace.secrets.%s: environment variable %s is not set", where, name, s.Env)
		}
		values[name] = v
		if b := s.Broker; b != nil {
			hosts := b.Hosts
			if b.Host != "" {
				hosts = append([]string{b.Host}, hosts...)
			}
			brokers[name] = sandbox.Broker{Hosts: hosts, Header: b.Header, BaseURLEnv: b.BaseURLEnv, Intercept: b.Intercept, Fallback: b.Fallback}
			if err := brokers[name].Validate(name); err != nil {
				return nil, fail("%s%v", where, err)
			}
		}
	}
	secrets, err := sandbox.NewSecrets(values)
	if err != nil {
		return nil, err
	}
	if secrets, err = secrets.WithBrokers(brokers); err != nil {
		return nil, fail("%v", err)
	}
	ws := &sandbox.Workspace{Scripts: w.Scripts, Instructions: w.Instructions, Secrets: secrets}
	if s := w.Source; s != nil {
		ws.Source = &sandbox.Source{Git: s.Git, Ref: s.Ref, Depth: string(s.Depth), Username: s.Username,
			TokenSecret: s.TokenSecret, CloneOn: string(s.CloneOn), Dir: f.rel(s.Dir)}
	}
	for _, st := range w.Setup {
		ws.Setup = append(ws.Setup, sandbox.SetupStep{Run: st.Run, Parallel: st.Parallel})
	}
	for _, sk := range w.Skills {
		ws.Skills = append(ws.Skills, sandbox.Skill{Path: sk.Path, Content: sk.Content, Git: sk.Git, Into: sk.Into, TokenSecret: sk.TokenSecret})
	}
	for _, m := range w.MCPServers {
		ws.MCPServers = append(ws.MCPServers, sandbox.MCPServer{Name: m.Name, Type: m.Type, URL: m.URL, Headers: m.Headers, Command: m.Command, Args: m.Args, Env: m.Env})
	}
	if ws.Source != nil || len(ws.Setup)+len(ws.Scripts)+len(ws.Skills)+len(ws.MCPServers) > 0 || ws.Instructions != "" || ws.Secrets.Len() > 0 {
		def.Workspace = ws
	}
	if pol := f.Policy; pol != nil {
		def.Policy = &sandbox.Policy{
			Commands:  sandbox.CommandRules{Allow: pol.Commands.Allow, Ask: pol.Commands.Ask, Deny: pol.Commands.Deny},
			FileWrite: sandbox.Decision(pol.FileWrite),
			Network:   sandbox.Decision(pol.Network.Decision),
			Egress:    pol.Network.Allow,
			Default:   sandbox.Decision(pol.Default),
		}
	}
	def.Retention = f.Retention
	def.Lifecycle = sandbox.Lifecycle{
		Reuse:             sandbox.Reuse(f.Lifecycle.Reuse),
		Snapshot:          sandbox.SnapshotMode(f.Lifecycle.Snapshot),
		SnapshotMaxAge:    timeOf(f.Lifecycle.SnapshotMaxAge),
		DestroyOnComplete: f.Lifecycle.DestroyOnComplete,
		KeepAlive:         timeOf(f.Lifecycle.KeepAlive),
		Idle: sandbox.Idle{
			Pause:        timeOf(f.Lifecycle.Idle.Pause),
			Destroy:      timeOf(f.Lifecycle.Idle.Destroy),
			ApprovalWait: timeOf(f.Lifecycle.Idle.ApprovalWait),
		},
		KeepBackground:   f.Lifecycle.KeepBackground,
		Checkpoint:       sandbox.CheckpointMode(f.Lifecycle.Checkpoint),
		CheckpointKeep:   f.Lifecycle.CheckpointKeep,
		CheckpointMaxAge: timeOf(f.Lifecycle.CheckpointMaxAge),
	}
	if err := def.Lifecycle.Validate(); err != nil && f.Lifecycle.Idle.line > 0 {
		return nil, fail("line %d: %v", f.Lifecycle.Idle.line, err)
	}
	if err := def.Validate(); err != nil {
		return nil, fail("%v", err)
	}
	return def, nil
}

func (f *File) secretLine(name string) string {
	for _, s := range f.secretsAt {
		if s.name == name {
			return fmt.Sprintf("line %d: ", s.line)
		}
	}
	return ""
}

// rel makes a relative path relative to the config file's directory.
func (f *File) rel(p string) string {
	if p == "" || filepath.IsAbs(p) || f.path == "" {
		return p
	}
	return filepath.Join(filepath.Dir(f.path), p)
}

func (f *File) provider(log *slog.Logger, progress func(string), scrubEnv []string) (sandbox.Provider, error) {
	name := f.Provider.Name
	if name == "" {
		name = DefaultProvider
	}
	e, ok := registry.Lookup(name)
	if !ok {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "config", f.path, "provider.name: unknown provider %q (known: %s)", name, strings.Join(registry.Names(), ", "))
	}
	c := f.Provider.Sections[name]
	if c == nil {
		var err error
		if c, err = e.Section(nil); err != nil {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "config", f.path, "provider.%s: %v", name, err)
		}
	}
	return registry.Build(c, registry.BuildOptions{Logger: log, Rel: f.rel, Progress: progress, ScrubEnv: scrubEnv})
}

func timeOf(d Duration) time.Duration { return time.Duration(d) }
