package e2b

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "E2B cloud sandboxes (Firecracker microVMs; E2B_API_KEY)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{APIKey: "-"})
			return p.Capabilities()
		},
		Limits:  func() registry.Limits { return registry.Limits{Text: "set by the E2B template and plan"} },
		Section: registry.SectionOf[Section]("provider.e2b"),
		Flags: []registry.Flag{
			{Name: "template", Usage: "the template or snapshot to create from (default base)"},
			{Name: "timeout", Usage: "the sandbox's time to live, e.g. 30m (default 30m; plans cap it)"},
			{Name: "domain", Usage: "E2B's domain (default E2B_DOMAIN or e2b.app)"},
			{Name: "api-url", Usage: "the control plane's URL (default E2B_API_URL or https://api.<domain>)"},
			{Name: "sandbox-url", Usage: "one URL for every sandbox's envd (default E2B_SANDBOX_URL)"},
			{Name: "workdir", Usage: "the workspace (default ~/workspace, /home/user/workspace)"},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{Template: v["template"], Domain: v["domain"], APIURL: v["api-url"], SandboxURL: v["sandbox-url"], Workdir: v["workdir"]}
			if t := v["timeout"]; t != "" {
				d, err := time.ParseDuration(t)
				if err != nil {
					return nil, registry.FlagError("timeout", err)
				}
				s.Timeout = d
			}
			return s.Provider(registry.BuildOptions{Logger: o.Logger})
		},
		CreateOptions: func(registry.Values) sandbox.CreateOptions { return sandbox.CreateOptions{} },
	})
}

// Section is corral.yaml's provider.e2b. The API key is never in the
// file: it is read from E2B_API_KEY.
type Section struct {
	Template           string        `yaml:"template"`
	Timeout            time.Duration `yaml:"timeout"`
	Domain             string        `yaml:"domain"`
	APIURL             string        `yaml:"apiUrl"`
	SandboxURL         string        `yaml:"sandboxUrl"`
	Workdir            string        `yaml:"workdir"`
	User               string        `yaml:"user"`
	AllowPublicTraffic *bool         `yaml:"allowPublicTraffic"`
}

// Provider builds the provider: the section over the SDK's variables
// (E2B_DOMAIN, E2B_API_URL, E2B_SANDBOX_URL) and E2B_API_KEY.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	or := func(v, env string) string {
		if v != "" {
			return v
		}
		return os.Getenv(env)
	}
	p, err := New(Options{APIKey: os.Getenv(APIKeyEnv), Domain: or(s.Domain, "E2B_DOMAIN"), APIURL: or(s.APIURL, "E2B_API_URL"),
		SandboxURL: or(s.SandboxURL, "E2B_SANDBOX_URL"), Template: s.Template, Timeout: s.Timeout, Workdir: s.Workdir,
		User: s.User, AllowPublicTraffic: s.AllowPublicTraffic, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

// Managed is the provider with the registry's management interfaces.
type Managed struct{ *Provider }

var (
	_ registry.Lister = Managed{}
	_ registry.Pruner = Managed{}
)

// ListSandboxes lists corral's sandboxes (metadata corral=1), newest first.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.list(ctx, map[string]string{MetaManaged: "1"})
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, s := range list {
		out = append(out, registry.Sandbox{ID: s.SandboxID, Key: s.Metadata[MetaKey], Image: s.TemplateID,
			State: s.State, CreatedAt: s.StartedAt, Detail: s})
	}
	return out, nil
}

// Prune kills corral's sandboxes started more than o.OlderThan ago
// (running ones too unless o.KeepRunning). Snapshots are templates whose
// age E2B's snapshot list does not report: they are left alone.
func (m Managed) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	list, err := m.ListSandboxes(ctx)
	if err != nil {
		return registry.PruneReport{}, err
	}
	rep := registry.PruneReport{Sandboxes: []string{}, Snapshots: []string{}}
	for _, s := range list {
		if time.Since(s.CreatedAt) < o.OlderThan || (o.KeepRunning && s.State == "running") {
			continue
		}
		if !o.DryRun {
			if err := m.Destroy(ctx, s.ID); err != nil {
				return rep, fmt.Errorf("e2b prune %s: %w", s.ID, err)
			}
		}
		rep.Sandboxes = append(rep.Sandboxes, s.ID)
	}
	return rep, nil
}
