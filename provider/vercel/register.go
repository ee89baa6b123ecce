package vercel

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.vercel section:
//
//	provider:
//	  name: vercel
//	  vercel: {teamId: team_…, projectId: prj_…, runtime: node24, timeout: 30m, ports: [3000], vcpus: 2}
//
// The token is never in the file: it is read from the variable tokenEnv
// names (default VERCEL_TOKEN), and never from VERCEL_OIDC_TOKEN unless
// tokenEnv says so. teamId and projectId absent are VERCEL_TEAM_ID and
// VERCEL_PROJECT_ID.
type Section struct {
	TokenEnv  string `yaml:"tokenEnv"`
	TeamID    string `yaml:"teamId"`
	ProjectID string `yaml:"projectId"`
	APIURL    string `yaml:"apiUrl"`
	Runtime   string `yaml:"runtime"`
	Timeout   string `yaml:"timeout"`
	Ports     []int  `yaml:"ports"`
	Vcpus     int    `yaml:"vcpus"`
	Ephemeral bool   `yaml:"ephemeral"`
	Workdir   string `yaml:"workdir"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	env := s.TokenEnv
	if env == "" {
		env = "VERCEL_TOKEN"
	}
	opts := Options{Token: os.Getenv(env), TeamID: s.TeamID, ProjectID: s.ProjectID, APIURL: s.APIURL, Runtime: s.Runtime,
		Ports: s.Ports, Vcpus: s.Vcpus, Ephemeral: s.Ephemeral, Workdir: s.Workdir, Logger: o.Logger}
	if opts.Token == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Vercel Sandbox needs %s (an access token from vercel.com/account/tokens)", env)
	}
	if opts.TeamID == "" {
		opts.TeamID = os.Getenv("VERCEL_TEAM_ID")
	}
	if opts.ProjectID == "" {
		opts.ProjectID = os.Getenv("VERCEL_PROJECT_ID")
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "provider.vercel.timeout %q: want a duration such as 30m", s.Timeout)
		}
		opts.Timeout = d
	}
	p, err := New(opts)
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "Vercel Sandbox (VERCEL_TOKEN, VERCEL_TEAM_ID, VERCEL_PROJECT_ID)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{Token: "-", TeamID: "-", ProjectID: "-"})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.vercel"),
		Flags: []registry.Flag{
			{Name: "team", Usage: "the Vercel team id (default VERCEL_TEAM_ID)"},
			{Name: "project", Usage: "the Vercel project id (default VERCEL_PROJECT_ID)"},
			{Name: "runtime", Usage: "node24 (default), node22 or python3.13"},
			{Name: "timeout", Usage: "a session's lifetime before Vercel stops it (default 30m)"},
			{Name: "ports", Usage: "ports to expose, comma-separated (at most 4)"},
			{Name: "network", Usage: `"none" denies the sandbox's network (deny-all)`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{TeamID: v["team"], ProjectID: v["project"], Runtime: v["runtime"], Timeout: v["timeout"]}
			if ps := v["ports"]; ps != "" {
				for _, f := range strings.Split(ps, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil || n < 1 || n > 65535 {
						return nil, registry.FlagError("ports", fmt.Errorf("want port numbers, not %q", f))
					}
					s.Ports = append(s.Ports, n)
				}
			}
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

// List returns corral's sandboxes (tag corral=1), newest first, all pages.
func (p *Provider) List(ctx context.Context) ([]Sandbox, error) {
	var out []Sandbox
	cursor := ""
	for {
		q := url.Values{"project": {p.opts.ProjectID}, "tags": {TagManaged + ":1"}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page SandboxPage
		if _, err := p.call(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/v2/sandboxes", Query: q}, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Sandboxes...)
		if page.Pagination.Next == nil || *page.Pagination.Next == "" {
			return out, nil
		}
		cursor = *page.Pagination.Next
	}
}

// ListSandboxes lists corral's sandboxes, newest first.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, s := range list {
		out = append(out, registry.Sandbox{ID: s.Name, Key: s.Tags[TagKey], Image: s.Runtime, State: s.Status,
			CreatedAt: time.UnixMilli(s.CreatedAt).UTC(), Detail: s})
	}
	return out, nil
}

// Prune deletes corral's sandboxes older than o.OlderThan (running ones
// too unless o.KeepRunning). Snapshots are not tagged, so none are pruned.
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
	_, err := m.call(ctx, cloudhttp.Request{Op: Name + ".ping", Method: http.MethodGet, Path: "/v2/sandboxes",
		Query: url.Values{"project": {m.opts.ProjectID}, "limit": {"1"}}}, nil)
	return err
}
