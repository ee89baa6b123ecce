package cloudflare

import (
	"context"
	"net/http"
	"os"
	"sort"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// The variables the provider reads when corral.yaml and the flags leave a
// value out.
const (
	// EnvURL is the bridge Worker's URL.
	EnvURL = "CORRAL_CLOUDFLARE_URL"
	// EnvToken is the default variable holding the bridge token.
	EnvToken = "CORRAL_CLOUDFLARE_TOKEN"
)

// Section is corral.yaml's provider.cloudflare section:
//
//	provider:
//	  name: cloudflare
//	  cloudflare: {url: https://corral-bridge.example.workers.dev, tokenEnv: CORRAL_CLOUDFLARE_TOKEN}
//
// The token is never in the file: it is read from the variable tokenEnv
// names (default CORRAL_CLOUDFLARE_TOKEN). url absent is
// CORRAL_CLOUDFLARE_URL.
type Section struct {
	URL      string `yaml:"url"`
	TokenEnv string `yaml:"tokenEnv"`
	Timeout  string `yaml:"timeout"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	env := s.TokenEnv
	if env == "" {
		env = EnvToken
	}
	opts := Options{URL: s.URL, Token: os.Getenv(env), Logger: o.Logger}
	if opts.URL == "" {
		opts.URL = os.Getenv(EnvURL)
	}
	if opts.URL != "" && opts.Token == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
			"Cloudflare needs the bridge token in %s (the value given to wrangler secret put BRIDGE_TOKEN)", env)
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "provider.cloudflare.timeout %q: want a duration such as 60s", s.Timeout)
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
		Name:         Name,
		Summary:      "Cloudflare Sandbox through the corral bridge Worker (CORRAL_CLOUDFLARE_URL, CORRAL_CLOUDFLARE_TOKEN)",
		Capabilities: Capabilities,
		Section:      registry.SectionOf[Section]("provider.cloudflare"),
		Flags: []registry.Flag{
			{Name: "url", Usage: "the bridge Worker's URL (default " + EnvURL + ")"},
			{Name: "token-env", Usage: "the variable holding the bridge token (default " + EnvToken + ")"},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{URL: v["url"], TokenEnv: v["token-env"]}
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

// ListSandboxes lists corral's sandboxes as the bridge's index knows them,
// newest first. The state is "unknown": the bridge cannot tell a running
// container from one that went idle.
func (m Managed) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	list, err := m.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]registry.Sandbox, 0, len(list))
	for _, s := range list {
		key := s.Labels[LabelKey]
		if key == "" {
			key = s.ID
		}
		out = append(out, registry.Sandbox{ID: s.ID, Key: key, State: "unknown", CreatedAt: s.CreatedAt, Detail: s})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// Prune destroys corral's sandboxes older than o.OlderThan. The bridge
// cannot tell a running container from an idle one, so with KeepRunning
// every sandbox counts as running and none is destroyed.
func (m Managed) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	list, err := m.ListSandboxes(ctx)
	if err != nil {
		return registry.PruneReport{}, err
	}
	rep := registry.PruneReport{Sandboxes: []string{}, Snapshots: []string{}}
	for _, s := range list {
		if o.KeepRunning || (o.OlderThan > 0 && time.Since(s.CreatedAt) < o.OlderThan) {
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

// Ping checks that the bridge answers with the token (GET /v1/health).
func (m Managed) Ping(ctx context.Context) error {
	_, err := m.c.Do(ctx, cloudhttp.Request{Op: Name + ".ping", Method: http.MethodGet, Path: "/v1/health"}, nil)
	return err
}
