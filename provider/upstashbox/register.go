package upstashbox

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// APIKeyEnv is the variable the key is read from by default.
const APIKeyEnv = "UPSTASH_BOX_API_KEY"

// Section is corral.yaml's provider.upstashbox section:
//
//	provider:
//	  name: upstashbox
//	  upstashbox: {baseUrl: https://us-east-1.box.upstash.com, runtime: node, size: small, keepAlive: false, previewAuth: bearer}
//
// The key is never in the file: it is read from the variable apiKeyEnv
// names (default UPSTASH_BOX_API_KEY). baseUrl absent is
// UPSTASH_BOX_BASE_URL, else Box's us-east-1.
type Section struct {
	APIKeyEnv       string `yaml:"apiKeyEnv"`
	BaseURL         string `yaml:"baseUrl"`
	Runtime         string `yaml:"runtime"`
	Size            string `yaml:"size"`
	KeepAlive       bool   `yaml:"keepAlive"`
	Workdir         string `yaml:"workdir"`
	DiscoverWorkdir bool   `yaml:"discoverWorkdir"`
	PreviewAuth     string `yaml:"previewAuth"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	env := s.APIKeyEnv
	if env == "" {
		env = APIKeyEnv
	}
	key := os.Getenv(env)
	if key == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Upstash Box needs %s (an API key from console.upstash.com)", env)
	}
	p, err := New(Options{APIKey: key, BaseURL: s.BaseURL, Runtime: s.Runtime, Size: s.Size, KeepAlive: s.KeepAlive,
		Workdir: s.Workdir, DiscoverWorkdir: s.DiscoverWorkdir, PreviewAuth: s.PreviewAuth, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "Upstash Box sandboxes (UPSTASH_BOX_API_KEY; UPSTASH_BOX_BASE_URL for another region)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{APIKey: "-"})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.upstashbox"),
		Flags: []registry.Flag{
			{Name: "base-url", Usage: "Upstash Box's API (default UPSTASH_BOX_BASE_URL, else https://us-east-1.box.upstash.com)"},
			{Name: "runtime", Usage: "the box runtime: node, python, golang, ruby, rust (default node)"},
			{Name: "size", Usage: "the box size: small, medium, large (default small)"},
			{Name: "network", Usage: `"none" gives the box the deny-all network policy`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{BaseURL: v["base-url"], Runtime: v["runtime"], Size: v["size"]}
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

// List returns corral's boxes (label "corral"), newest first.
func (p *Provider) List(ctx context.Context) ([]Box, error) {
	var out []Box
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/v2/box",
		Query: url.Values{"label": {LabelManaged}}}, &out); err != nil {
		return nil, err
	}
	out = slices.DeleteFunc(out, func(b Box) bool { return !slices.Contains(b.Labels, LabelManaged) || gone(b.Status) })
	slices.SortFunc(out, func(a, b Box) int { return int(b.CreatedAt - a.CreatedAt) })
	return out, nil
}

// ListSandboxes lists corral's boxes, newest first; the key is the name.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, b := range list {
		out = append(out, registry.Sandbox{ID: b.ID, Key: b.Name, Image: strings.TrimSpace(b.Runtime + " " + b.Size),
			State: b.Status, CreatedAt: time.Unix(b.CreatedAt, 0), Detail: b})
	}
	return out, nil
}

// Prune deletes corral's boxes older than o.OlderThan (running ones too
// unless o.KeepRunning). Snapshots are not pruned.
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
		if o.KeepRunning && (s.State == StatusRunning || s.State == StatusIdle) {
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

// Ping checks that the API answers with the key.
func (m Managed) Ping(ctx context.Context) error {
	_, err := m.c.Do(ctx, cloudhttp.Request{Op: Name + ".ping", Method: http.MethodGet, Path: "/v2/box",
		Query: url.Values{"label": {LabelManaged}}}, nil)
	return err
}
