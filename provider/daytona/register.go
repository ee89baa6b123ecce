package daytona

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.daytona section:
//
//	provider:
//	  name: daytona
//	  daytona: {apiUrl: https://app.daytona.io/api, target: us, snapshot: daytona-medium, autoStopInterval: 30, ephemeral: false}
//
// The key is never in the file: it is read from the variable apiKeyEnv
// names (default DAYTONA_API_KEY). apiUrl absent is DAYTONA_API_URL, else
// Daytona's cloud.
type Section struct {
	APIKeyEnv        string `yaml:"apiKeyEnv"`
	APIURL           string `yaml:"apiUrl"`
	Target           string `yaml:"target"`
	Snapshot         string `yaml:"snapshot"`
	Workdir          string `yaml:"workdir"`
	AutoStopInterval *int   `yaml:"autoStopInterval"`
	Ephemeral        bool   `yaml:"ephemeral"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	env := s.APIKeyEnv
	if env == "" {
		env = "DAYTONA_API_KEY"
	}
	key := os.Getenv(env)
	if key == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Daytona needs %s (an API key from app.daytona.io/dashboard/keys)", env)
	}
	p, err := New(Options{APIKey: key, APIURL: s.APIURL, Target: s.Target, Snapshot: s.Snapshot, Workdir: s.Workdir,
		AutoStopInterval: s.AutoStopInterval, Ephemeral: s.Ephemeral, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return Managed{p}, nil
}

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "Daytona cloud sandboxes (DAYTONA_API_KEY; DAYTONA_API_URL for another control plane)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{APIKey: "-"})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.daytona"),
		Flags: []registry.Flag{
			{Name: "api-url", Usage: "Daytona's API (default DAYTONA_API_URL, else https://app.daytona.io/api)"},
			{Name: "target", Usage: "the Daytona region (us, eu; default the organization's)"},
			{Name: "snapshot", Usage: "the Daytona snapshot sandboxes are made from (default Daytona's)"},
			{Name: "auto-stop", Usage: "auto-stop interval in minutes (0 is off; default Daytona's 15)"},
			{Name: "network", Usage: `"none" blocks the sandbox's network (networkBlockAll)`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{APIURL: v["api-url"], Target: v["target"], Snapshot: v["snapshot"]}
			if a := v["auto-stop"]; a != "" {
				n, err := strconv.Atoi(a)
				if err != nil || n < 0 {
					return nil, registry.FlagError("auto-stop", fmt.Errorf("want minutes (0 or more), not %q", a))
				}
				s.AutoStopInterval = &n
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

// List returns corral's sandboxes (label corral=1), newest first, all
// pages.
func (p *Provider) List(ctx context.Context) ([]Sandbox, error) {
	labels, _ := json.Marshal(map[string]string{LabelManaged: "1"})
	var out []Sandbox
	cursor := ""
	for {
		q := url.Values{"labels": {string(labels)}, "limit": {"100"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page ListSandboxes
		if _, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/sandbox", Query: q}, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return out, nil
		}
		cursor = *page.NextCursor
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
		created, _ := time.Parse(time.RFC3339Nano, s.CreatedAt)
		out = append(out, registry.Sandbox{ID: s.ID, Key: s.Labels[LabelKey], Image: s.Snapshot, State: s.State, CreatedAt: created, Detail: s})
	}
	return out, nil
}

// Prune deletes corral's sandboxes older than o.OlderThan (running ones
// too unless o.KeepRunning). Snapshots are not listed by corral's label,
// so none are pruned.
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
		if o.KeepRunning && s.State == "started" {
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

// Ping checks that the API answers with the key (a one-item list).
func (m Managed) Ping(ctx context.Context) error {
	_, err := m.c.Do(ctx, cloudhttp.Request{Op: Name + ".ping", Method: http.MethodGet, Path: "/sandbox", Query: url.Values{"limit": {"1"}}}, nil)
	return err
}
