package docker

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.docker section, as the registry
// decodes it:
//
//	provider:
//	  name: docker
//	  docker: {image: node:22, network: bridge, memory: 4g, cpus: 2, pidsLimit: 2048}
//
// Memory, CPUs and PidsLimit absent keep the defaults (2g, 2, 1024); 0 or
// "unlimited" removes a limit.
type Section struct {
	Image      string      `yaml:"image"`
	Host       string      `yaml:"host"`
	Workdir    string      `yaml:"workdir"`
	Network    string      `yaml:"network"`
	Memory     MemoryLimit `yaml:"memory"`
	CPUs       CPULimit    `yaml:"cpus"`
	PidsLimit  PidsLimit   `yaml:"pidsLimit"`
	User       string      `yaml:"user"`
	Ports      []int       `yaml:"ports"`
	ExtraHosts []string    `yaml:"extraHosts"`
	// Pull is the image pull policy: missing (absent: the default),
	// always or never.
	Pull PullPolicyYAML `yaml:"pull"`
}

// PullPolicyYAML is provider.docker.pull: missing, always or never.
type PullPolicyYAML PullPolicy

// UnmarshalYAML parses the policy.
func (p *PullPolicyYAML) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParsePullPolicy(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode || strings.TrimSpace(n.Value) == "" {
		return fmt.Errorf("line %d: provider.docker.pull: want missing, always or never, not %q", n.Line, n.Value)
	}
	*p = PullPolicyYAML(v)
	return nil
}

// onPull turns a registry progress hook into the provider's pull callback.
func onPull(progress func(string)) func(PullProgress) {
	if progress == nil {
		return nil
	}
	return func(p PullProgress) { progress(p.String()) }
}

// Provider builds the docker provider the section describes; the image is
// required.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	if s.Image == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.config", "", "provider.docker.image is required for the docker provider")
	}
	return New(Options{
		Image: s.Image, Host: s.Host, Workdir: s.Workdir, Network: s.Network, Memory: int64(s.Memory),
		CPUs: float64(s.CPUs), PidsLimit: int64(s.PidsLimit), User: s.User, Ports: s.Ports, ExtraHosts: s.ExtraHosts, Logger: o.Logger,
		Pull: PullPolicy(s.Pull), OnPull: onPull(o.Progress),
	})
}

// MemoryLimit is a memory limit in corral.yaml: a size such as 512m or 2g
// (powers of 1024), or 0 or "unlimited" for none (Unlimited). Absent is 0,
// the provider's default.
type MemoryLimit int64

// UnmarshalYAML parses the limit.
func (m *MemoryLimit) UnmarshalYAML(n *yaml.Node) error {
	v, err := limit(n, "provider.docker.memory", ParseMemory)
	*m = MemoryLimit(v)
	return err
}

// CPULimit is a CPU limit in corral.yaml: a number of CPUs such as 2 or
// 0.5, or 0 or "unlimited" for none (Unlimited). Absent is 0, the
// provider's default.
type CPULimit float64

// UnmarshalYAML parses the limit.
func (c *CPULimit) UnmarshalYAML(n *yaml.Node) error {
	v, err := limit(n, "provider.docker.cpus", ParseCPUs)
	*c = CPULimit(v)
	return err
}

// PidsLimit is a process limit in corral.yaml: a count such as 1024, or 0
// or "unlimited" for none (Unlimited). Absent is 0, the provider's
// default.
type PidsLimit int64

// UnmarshalYAML parses the limit.
func (p *PidsLimit) UnmarshalYAML(n *yaml.Node) error {
	v, err := limit(n, "provider.docker.pidsLimit", ParsePids)
	*p = PidsLimit(v)
	return err
}

// limit reads a scalar with parse; an explicit empty value is an error
// (only an absent key keeps the default).
func limit[T int64 | float64](n *yaml.Node, key string, parse func(string) (T, error)) (T, error) {
	if n.Kind != yaml.ScalarNode || strings.TrimSpace(n.Value) == "" {
		return 0, fmt.Errorf("line %d: %s: want a value, or 0 or unlimited for no limit", n.Line, key)
	}
	v, err := parse(n.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: %s: %v", n.Line, key, err)
	}
	return v, nil
}
