package sprites

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.sprites section:
//
//	provider:
//	  name: sprites
//	  sprites: {apiUrl: https://api.sprites.dev, workdir: /home/sprite/workspace, urlAuth: sprite, httpPort: 8080, waitForCapacity: false}
//
// The token is never in the file: it is read from the variable apiKeyEnv
// names (default SPRITES_API_KEY). apiUrl absent is SPRITES_API_URL, else
// api.sprites.dev.
type Section struct {
	APIKeyEnv       string `yaml:"apiKeyEnv"`
	APIURL          string `yaml:"apiUrl"`
	Workdir         string `yaml:"workdir"`
	URLAuth         string `yaml:"urlAuth"`
	HTTPPort        int    `yaml:"httpPort"`
	WaitForCapacity bool   `yaml:"waitForCapacity"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	env := s.APIKeyEnv
	if env == "" {
		env = "SPRITES_API_KEY"
	}
	key := os.Getenv(env)
	if key == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Sprites needs %s (a token from sprites.dev, or `sprite org auth`)", env)
	}
	p, err := New(Options{APIKey: key, APIURL: s.APIURL, Workdir: s.Workdir, URLAuth: s.URLAuth, HTTPPort: s.HTTPPort,
		WaitForCapacity: s.WaitForCapacity, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "Sprites by Fly.io (SPRITES_API_KEY; SPRITES_API_URL for another API)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{APIKey: "-"})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.sprites"),
		Flags: []registry.Flag{
			{Name: "api-url", Usage: "the Sprites API (default SPRITES_API_URL, else https://api.sprites.dev)"},
			{Name: "workdir", Usage: "the workspace in the Sprite (default $HOME/workspace)"},
			{Name: "url-auth", Usage: `the Sprite URL's auth: "sprite" (Bearer, the default) or "public"`},
			{Name: "http-port", Usage: "the port the Sprite's URL reaches (default 8080)"},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{APIURL: v["api-url"], Workdir: v["workdir"], URLAuth: v["url-auth"]}
			if a := v["http-port"]; a != "" {
				n, err := strconv.Atoi(a)
				if err != nil || n <= 0 || n > 65535 {
					return nil, registry.FlagError("http-port", fmt.Errorf("want a port, not %q", a))
				}
				s.HTTPPort = n
			}
			return s.Provider(registry.BuildOptions{Logger: o.Logger})
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

// List returns corral's Sprites (label "corral"), all pages. Sprites
// lists by name prefix, not by label, so every page is read and filtered.
func (p *Provider) List(ctx context.Context) ([]Sprite, error) {
	var out []Sprite
	token := ""
	for {
		q := url.Values{"max_results": {"100"}}
		if token != "" {
			q.Set("continuation_token", token)
		}
		var page ListSprites
		if _, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/v1/sprites", Query: q}, &page); err != nil {
			return nil, err
		}
		for _, s := range page.Sprites {
			if slices.Contains(s.Labels, Label) {
				out = append(out, s)
			}
		}
		if !page.HasMore || page.NextToken == "" {
			return out, nil
		}
		token = page.NextToken
	}
}

// ListSandboxes lists corral's Sprites; the key is the name.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, s := range list {
		created, _ := time.Parse(time.RFC3339Nano, s.CreatedAt)
		out = append(out, registry.Sandbox{ID: s.Name, Key: s.Name, State: s.Status, CreatedAt: created, Detail: s})
	}
	slices.SortFunc(out, func(a, b registry.Sandbox) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// Prune deletes corral's Sprites older than o.OlderThan (running ones too
// unless o.KeepRunning). Checkpoints die with their Sprite.
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

// Ping checks that the API answers with the token (a one-item list).
func (m Managed) Ping(ctx context.Context) error {
	_, err := m.c.Do(ctx, cloudhttp.Request{Op: Name + ".ping", Method: http.MethodGet, Path: "/v1/sprites", Query: url.Values{"max_results": {"1"}}}, nil)
	return err
}
