// Package config reads corral.yaml: the sandbox definition the CLI and the
// daemon run (provider and its options, workspace source, setup, scripts,
// instructions, skills, secrets from named environment variables, policy
// and lifecycle).
//
// Unknown keys and bad values are errors that name the key and the line.
// The provider section's keys belong to the providers: each registers its
// section with provider/registry, and config imports no provider (a binary
// links the providers it wants, see cmd/corral/providers_all.go). Docker
// sandboxes, for instance, are limited by default (memory 2g without swap,
// 2 CPUs, 1024 processes; see provider/docker): memory, cpus and pidsLimit
// raise or lower each limit, and 0 or "unlimited" removes it.
// Secret values never appear in the file: each secret names the host
// environment variable that holds it.
//
//	id: my-project
//	provider:
//	  name: docker
//	  docker: {image: node:22, network: bridge, memory: 4g, cpus: 2, pidsLimit: 2048}
//	workspace:
//	  source: {git: file:///srv/git/app.git, ref: main}
//	  setup:
//	    - npm ci
//	    - parallel: [npm run build, npm run lint]
//	  scripts: {test: npm test}
//	  instructions: Keep changes small.
//	  skills:
//	    - {git: https://github.com/acme/skills.git}
//	  mcpServers:
//	    - {name: docs, url: "https://docs.example/mcp", headers: {Authorization: "Bearer ${secret:DOCS_TOKEN}"}}
//	    - {name: fs, command: npx, args: [-y, fs-mcp]}
//	  secrets:
//	    GITHUB_TOKEN: {env: GITHUB_TOKEN}
//	    DOCS_TOKEN: {env: DOCS_TOKEN}
//	    ANTHROPIC_API_KEY: {env: ANTHROPIC_API_KEY, broker: {hosts: [api.anthropic.com], header: x-api-key}}
//	policy:
//	  commands: {allow: [npm test], deny: ["rm -rf *"]}
//	  network: allow
//	lifecycle: {reuse: thread, snapshot: after-setup, idle: {pause: 10m, destroy: 24h}}
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// DefaultFile is the file looked for in the current directory.
const DefaultFile = "corral.yaml"

// File is the decoded corral.yaml.
type File struct {
	ID        string    `yaml:"id"`
	Provider  Provider  `yaml:"provider"`
	Workspace Workspace `yaml:"workspace"`
	Policy    *Policy   `yaml:"policy"`
	Lifecycle Lifecycle `yaml:"lifecycle"`
	// Retention is what the stores keep of ended runs: all (default),
	// sandbox or none.
	Retention string     `yaml:"retention"`
	path      string     // where it was read from
	secretsAt []secretAt // for errors
}

// Provider chooses and configures the provider: its name, and one section
// per provider keyed by the name it registered under (provider.docker,
// provider.local, ...; see provider/registry). Each section is decoded by
// its provider when the file is parsed, with line-numbered errors, even
// when another provider is chosen.
type Provider struct {
	Name string
	// Sections are the decoded sections, by provider name.
	Sections map[string]registry.Config
}

// UnmarshalYAML reads the name and hands each section to the provider
// registered under its key.
func (p *Provider) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: provider: want a mapping (name, and a section per provider)", n.Line)
	}
	p.Sections = map[string]registry.Config{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "name" {
			if v.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: provider.name: want a provider name (%s)", v.Line, strings.Join(registry.Names(), ", "))
			}
			p.Name = v.Value
			continue
		}
		e, ok := registry.Lookup(k.Value)
		if !ok {
			return fmt.Errorf("line %d: provider: unknown key %q (want name, or a section of a provider: %s)", k.Line, k.Value, strings.Join(registry.Names(), ", "))
		}
		c, err := e.Section(v)
		if err != nil {
			return err
		}
		p.Sections[k.Value] = c
	}
	return nil
}

// Workspace is the workspace section.
type Workspace struct {
	Source       *Source           `yaml:"source"`
	Setup        []SetupStep       `yaml:"setup"`
	Scripts      map[string]string `yaml:"scripts"`
	Instructions string            `yaml:"instructions"`
	Skills       []Skill           `yaml:"skills"`
	MCPServers   []MCPServer       `yaml:"mcpServers"`
	Secrets      map[string]Secret `yaml:"secrets"`
}

// MCPServer is an MCP server given to every run's agent (see
// sandbox.MCPServer): a url (type http or sse) or a command (stdio).
// Header and env values may name secrets as ${secret:NAME}.
type MCPServer struct {
	Name    string            `yaml:"name"`
	Type    string            `yaml:"type"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
}

// Source is the workspace source.
type Source struct {
	Git         string  `yaml:"git"`
	Ref         string  `yaml:"ref"`
	Depth       Depth   `yaml:"depth"`
	Username    string  `yaml:"username"`
	TokenSecret string  `yaml:"tokenSecret"`
	CloneOn     CloneOn `yaml:"cloneOn"`
	Dir         string  `yaml:"dir"`
}

// Skill is a file skill (path + content) or a git skill pack.
type Skill struct {
	Path        string `yaml:"path"`
	Content     string `yaml:"content"`
	Git         string `yaml:"git"`
	Into        string `yaml:"into"`
	TokenSecret string `yaml:"tokenSecret"`
}

// Secret names the host environment variable holding a secret's value,
// and, when Broker is set, where the value may be used: a brokered secret
// never enters the sandbox (see sandbox.Broker).
type Secret struct {
	Env    string  `yaml:"env"`
	Broker *Broker `yaml:"broker"`
}

// Broker is a secret's broker section: {hosts: [api.anthropic.com],
// header: x-api-key} (host: for one host; header bearer, basic or a header
// name; baseURLEnv for the variable that points the agent at the gateway;
// intercept: true for HTTPS through the gateway's proxy and CA).
type Broker struct {
	Host       string   `yaml:"host"`
	Hosts      []string `yaml:"hosts"`
	Header     string   `yaml:"header"`
	BaseURLEnv string   `yaml:"baseURLEnv"`
	Intercept  bool     `yaml:"intercept"`
	// Fallback "env": where the gateway is out of the sandbox's reach,
	// the value goes in its environment (said at run start).
	Fallback string `yaml:"fallback"`
}

type secretAt struct {
	name string
	line int
}

// Policy is the policy section.
type Policy struct {
	Commands struct {
		Allow []string `yaml:"allow"`
		Ask   []string `yaml:"ask"`
		Deny  []string `yaml:"deny"`
	} `yaml:"commands"`
	FileWrite Decision    `yaml:"fileWrite"`
	Network   NetworkRule `yaml:"network"`
	Default   Decision    `yaml:"default"`
}

// NetworkRule is policy.network: a decision (allow, ask, deny) or an
// egress allow-list {allow: [api.anthropic.com, "*.npmjs.org"]}.
type NetworkRule struct {
	Decision Decision
	Allow    []string
}

// UnmarshalYAML reads either form.
func (r *NetworkRule) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return r.Decision.UnmarshalYAML(n)
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: policy.network: want allow, ask, deny or {allow: [hosts]}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Value != "allow" {
			return fmt.Errorf("line %d: policy.network: unknown key %q (want allow: [hosts])", k.Line, k.Value)
		}
	}
	var v struct {
		Allow []string `yaml:"allow"`
	}
	if err := n.Decode(&v); err != nil {
		return err
	}
	if len(v.Allow) == 0 {
		return fmt.Errorf("line %d: policy.network.allow: name at least one host (or write network: deny)", n.Line)
	}
	r.Allow = v.Allow
	return nil
}

// Lifecycle is the lifecycle section.
type Lifecycle struct {
	Reuse             Reuse        `yaml:"reuse"`
	Snapshot          SnapshotMode `yaml:"snapshot"`
	SnapshotMaxAge    Duration     `yaml:"snapshotMaxAge"`
	DestroyOnComplete bool         `yaml:"destroyOnComplete"`
	KeepAlive         Duration     `yaml:"keepAlive"`
	Idle              Idle         `yaml:"idle"`
	KeepBackground    bool         `yaml:"keepBackground"`
	Checkpoint        string       `yaml:"checkpoint"`
	CheckpointKeep    int          `yaml:"checkpointKeep"`
	CheckpointMaxAge  Duration     `yaml:"checkpointMaxAge"`
}

// Idle is lifecycle.idle: when an idle sandbox is paused and destroyed
// (sandbox.Idle). destroy is keepAlive's newer name; set one of them, or
// both to the same value.
type Idle struct {
	Pause        Duration `yaml:"pause"`
	Destroy      Duration `yaml:"destroy"`
	ApprovalWait Duration `yaml:"approvalWait"`
	line         int
}

// UnmarshalYAML decodes the section and keeps its line for later errors.
func (i *Idle) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: lifecycle.idle must be a mapping such as {pause: 10m, destroy: 24h}", n.Line)
	}
	for j := 0; j+1 < len(n.Content); j += 2 {
		switch k := n.Content[j]; k.Value {
		case "pause", "destroy", "approvalWait":
		default:
			return fmt.Errorf("line %d: lifecycle.idle: unknown key %q (want pause, destroy or approvalWait)", k.Line, k.Value)
		}
	}
	type plain Idle
	var v plain
	if err := n.Decode(&v); err != nil {
		return err
	}
	*i = Idle(v)
	i.line = n.Line
	return nil
}

// Find returns the config file to use: path when given (it must exist),
// else corral.yaml in the current directory when there is one, else "".
func Find(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", sandbox.Errorf(sandbox.InvalidArgument, "config", path, "cannot read the config file: %v", errors.Unwrap(err))
		}
		return path, nil
	}
	if _, err := os.Stat(DefaultFile); err == nil {
		return DefaultFile, nil
	}
	return "", nil
}

// Load reads and checks a config file.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "config", path, "cannot read the config file: %v", errors.Unwrap(err))
	}
	f, err := Parse(data)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "config", path, "%s", err.Error())
	}
	f.path = path
	return f, nil
}

// Parse decodes and checks config text.
func Parse(data []byte) (*File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return &f, nil // an empty file is the default definition
		}
		return nil, tidyYAMLError(err)
	}
	// Record where each secret was declared, for error messages.
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err == nil {
		if n := lookup(&root, "workspace", "secrets"); n != nil && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				f.secretsAt = append(f.secretsAt, secretAt{name: n.Content[i].Value, line: n.Content[i].Line})
			}
		}
	}
	return &f, nil
}

var fieldNotFound = regexp.MustCompile(`field (\S+) not found in type (\S+)`)

// tidyYAMLError rewrites yaml.v3's messages to name the key plainly.
func tidyYAMLError(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, m := range te.Errors {
			m = fieldNotFound.ReplaceAllString(m, `unknown key "$1"`)
			m = strings.Replace(m, "cannot unmarshal ", "bad value: cannot read ", 1)
			msgs[i] = m
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return errors.New(strings.TrimPrefix(err.Error(), "yaml: "))
}

func lookup(n *yaml.Node, path ...string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// SetupStep is a setup entry: a command string, or {parallel: [...]}.
type SetupStep struct {
	Run      string
	Parallel []string
}

// UnmarshalYAML reads either form.
func (s *SetupStep) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if strings.TrimSpace(n.Value) == "" {
			return fmt.Errorf("line %d: setup: empty command", n.Line)
		}
		s.Run = n.Value
		return nil
	}
	var p struct {
		Parallel []string `yaml:"parallel"`
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: setup: want a command or {parallel: [commands]}", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; k != "parallel" {
			return fmt.Errorf("line %d: setup: unknown key %q (want parallel)", n.Content[i].Line, k)
		}
	}
	if err := n.Decode(&p); err != nil {
		return err
	}
	if len(p.Parallel) == 0 {
		return fmt.Errorf("line %d: setup: parallel needs at least one command", n.Line)
	}
	s.Parallel = p.Parallel
	return nil
}

// enum decodes a string that must be one of a set.
func enum(n *yaml.Node, key string, allowed ...string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("line %d: %s: want one of %s", n.Line, key, strings.Join(allowed, ", "))
	}
	for _, a := range allowed {
		if n.Value == a {
			return a, nil
		}
	}
	return "", fmt.Errorf("line %d: %s: %q is not one of %s", n.Line, key, n.Value, strings.Join(allowed, ", "))
}

// Decision is allow, ask or deny.
type Decision string

// UnmarshalYAML checks the value.
func (d *Decision) UnmarshalYAML(n *yaml.Node) error {
	v, err := enum(n, "decision", "allow", "ask", "deny")
	*d = Decision(v)
	return err
}

// Reuse is thread or none.
type Reuse string

// UnmarshalYAML checks the value.
func (r *Reuse) UnmarshalYAML(n *yaml.Node) error {
	v, err := enum(n, "lifecycle.reuse", "thread", "none")
	*r = Reuse(v)
	return err
}

// SnapshotMode is after-setup, after-run or none.
type SnapshotMode string

// UnmarshalYAML checks the value.
func (s *SnapshotMode) UnmarshalYAML(n *yaml.Node) error {
	v, err := enum(n, "lifecycle.snapshot", "after-setup", "after-run", "none")
	*s = SnapshotMode(v)
	return err
}

// CloneOn is host or sandbox.
type CloneOn string

// UnmarshalYAML checks the value.
func (c *CloneOn) UnmarshalYAML(n *yaml.Node) error {
	v, err := enum(n, "source.cloneOn", "host", "sandbox")
	*c = CloneOn(v)
	return err
}

// Depth is a clone depth: a positive number or "full".
type Depth string

// UnmarshalYAML checks the value.
func (d *Depth) UnmarshalYAML(n *yaml.Node) error {
	if _, err := sandbox.ParseDepth(n.Value); err != nil || n.Kind != yaml.ScalarNode || n.Value == "" {
		return fmt.Errorf("line %d: source.depth: %q is not a positive number or full", n.Line, n.Value)
	}
	*d = Depth(n.Value)
	return nil
}

// Duration is a Go duration such as 30m or 24h.
type Duration time.Duration

// UnmarshalYAML parses the duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 || n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: bad duration %q (write it like 90s, 30m or 24h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}
