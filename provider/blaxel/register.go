package blaxel

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.blaxel section:
//
//	provider:
//	  name: blaxel
//	  blaxel: {workspace: my-ws, region: us-pdx-1, image: blaxel/base-image:latest, memory: 2048, ttl: 1h, workdir: /workspace}
//
// The API key is never in the file: it is read from the variable apiKeyEnv
// names (default BL_API_KEY). workspace, region and apiUrl absent are
// BL_WORKSPACE, BL_REGION and BL_API_URL. ttl "none" opts out of the TTL
// (the sandbox lives until it is destroyed); publicPreviews makes
// ConnectPort's previews public (default private, with a token header).
type Section struct {
	APIKeyEnv      string `yaml:"apiKeyEnv"`
	Workspace      string `yaml:"workspace"`
	APIURL         string `yaml:"apiUrl"`
	Region         string `yaml:"region"`
	Image          string `yaml:"image"`
	Memory         int    `yaml:"memory"`
	TTL            string `yaml:"ttl"`
	Workdir        string `yaml:"workdir"`
	PublicPreviews bool   `yaml:"publicPreviews"`
	PreviewTTL     string `yaml:"previewTtl"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	env := s.APIKeyEnv
	if env == "" {
		env = "BL_API_KEY"
	}
	opts := Options{APIKey: os.Getenv(env), Workspace: s.Workspace, APIURL: s.APIURL, Region: s.Region, Image: s.Image,
		Memory: s.Memory, Workdir: s.Workdir, PublicPreviews: s.PublicPreviews, Logger: o.Logger}
	if opts.APIKey == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Blaxel needs %s (an API key from app.blaxel.ai)", env)
	}
	if opts.Workspace == "" {
		opts.Workspace = os.Getenv("BL_WORKSPACE")
	}
	if opts.Region == "" {
		opts.Region = os.Getenv("BL_REGION")
	}
	if opts.APIURL == "" {
		opts.APIURL = os.Getenv("BL_API_URL")
	}
	switch s.TTL {
	case "":
	case "none", "null", "0":
		opts.NoTTL = true
	default:
		d, err := time.ParseDuration(s.TTL)
		if err != nil || d <= 0 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", `provider.blaxel.ttl %q: want a duration such as 1h, or "none"`, s.TTL)
		}
		opts.TTL = d
	}
	if s.PreviewTTL != "" {
		d, err := time.ParseDuration(s.PreviewTTL)
		if err != nil || d <= 0 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "provider.blaxel.previewTtl %q: want a duration such as 1h", s.PreviewTTL)
		}
		opts.PreviewTTL = d
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
		Summary: "Blaxel sandboxes (BL_API_KEY, BL_WORKSPACE, BL_REGION)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{APIKey: "-", Workspace: "-"})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.blaxel"),
		Flags: []registry.Flag{
			{Name: "workspace", Usage: "the Blaxel workspace (default BL_WORKSPACE)"},
			{Name: "region", Usage: "the region sandboxes run in (default BL_REGION)"},
			{Name: "image", Usage: "the sandbox image (default blaxel/base-image:latest)"},
			{Name: "ttl", Usage: `how long a sandbox lives (default 1h; "none" opts out)`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{Workspace: v["workspace"], Region: v["region"], Image: v["image"], TTL: v["ttl"]}
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

// List returns corral's sandboxes (label corral=1), newest first.
func (p *Provider) List(ctx context.Context) ([]Sandbox, error) {
	var raw json.RawMessage
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/sandboxes"}, &raw); err != nil {
		return nil, err
	}
	// An array, or (newer API versions) a page {data, meta}, as the SDK's
	// unwrapListData reads both.
	var page []Sandbox
	if err := json.Unmarshal(raw, &page); err != nil {
		var paged struct {
			Data []Sandbox `json:"data"`
		}
		if perr := json.Unmarshal(raw, &paged); perr != nil {
			return nil, sandbox.Errorf(sandbox.Internal, Name+".list", "", "blaxel's sandbox list does not decode: %v", err)
		}
		page = paged.Data
	}
	out := page[:0]
	for _, s := range page {
		if s.Metadata.Labels[LabelManaged] == "1" {
			out = append(out, s)
		}
	}
	return out, nil
}

// ListSandboxes lists corral's sandboxes, newest first.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, s := range list {
		created, _ := time.Parse(time.RFC3339, s.Metadata.CreatedAt)
		img := ""
		if s.Spec.Runtime != nil {
			img = s.Spec.Runtime.Image
		}
		out = append(out, registry.Sandbox{ID: s.Metadata.Name, Key: s.Metadata.Labels[LabelKey], Image: img, State: s.Status,
			CreatedAt: created.UTC(), Detail: s})
	}
	return out, nil
}

// Prune deletes corral's sandboxes older than o.OlderThan (deployed ones
// too unless o.KeepRunning). Blaxel keeps no corral snapshots.
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
		if o.KeepRunning && s.State == "DEPLOYED" {
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

// Ping checks that the control plane answers with the key (a list).
func (m Managed) Ping(ctx context.Context) error {
	_, err := m.c.Do(ctx, cloudhttp.Request{Op: Name + ".ping", Method: http.MethodGet, Path: "/sandboxes"}, nil)
	return err
}
