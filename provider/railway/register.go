package railway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Variables the provider reads, as the official SDK names them.
const (
	EnvProjectToken = "RAILWAY_TOKEN"
	EnvAPIToken     = "RAILWAY_API_TOKEN"
	EnvEnvironment  = "RAILWAY_ENVIRONMENT_ID"
	EnvEndpoint     = "RAILWAY_GRAPHQL_ENDPOINT"
	EnvExecEndpoint = "RAILWAY_TCP_PROXY_WS_ENDPOINT"
)

// Section is corral.yaml's provider.railway section:
//
//	provider:
//	  name: railway
//	  railway: {environmentId: 0c1d…, region: us-west2, idleTimeoutMinutes: 30, network: isolated, workdir: /workspace}
//
// The token is never in the file. Without tokenEnv it is found as the SDK
// finds it: RAILWAY_TOKEN (a project token, sent as Project-Access-Token)
// first, else RAILWAY_API_TOKEN (an account or workspace token, sent as
// Authorization: Bearer). tokenEnv names another variable (authType
// "project-token" or "bearer", default bearer, says how it is sent).
// environmentId, endpoint and execEndpoint absent are
// RAILWAY_ENVIRONMENT_ID, RAILWAY_GRAPHQL_ENDPOINT and
// RAILWAY_TCP_PROXY_WS_ENDPOINT. network is isolated (default) or private
// (the environment's private network); "none" is refused, since both keep
// public egress. idleTimeoutMinutes absent is the plan's default, 0
// disables it; heartbeat is how often a live run touches the sandbox.
type Section struct {
	TokenEnv           string `yaml:"tokenEnv"`
	AuthType           string `yaml:"authType"`
	EnvironmentID      string `yaml:"environmentId"`
	Endpoint           string `yaml:"endpoint"`
	ExecEndpoint       string `yaml:"execEndpoint"`
	Region             string `yaml:"region"`
	IdleTimeoutMinutes *int   `yaml:"idleTimeoutMinutes"`
	Network            string `yaml:"network"`
	Workdir            string `yaml:"workdir"`
	Heartbeat          string `yaml:"heartbeat"`
}

// Provider builds the provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	const op = Name + ".config"
	opts := Options{EnvironmentID: s.EnvironmentID, Endpoint: s.Endpoint, ExecEndpoint: s.ExecEndpoint, Region: s.Region,
		IdleTimeoutMinutes: s.IdleTimeoutMinutes, Workdir: s.Workdir, Logger: o.Logger}
	switch {
	case s.TokenEnv != "":
		opts.Token = os.Getenv(s.TokenEnv)
		switch s.AuthType {
		case "", "bearer":
		case "project-token":
			opts.ProjectToken = true
		default:
			return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", `provider.railway.authType %q: want "bearer" or "project-token"`, s.AuthType)
		}
		if opts.Token == "" {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, "", "Railway needs %s (provider.railway.tokenEnv): a Railway token", s.TokenEnv)
		}
	case os.Getenv(EnvProjectToken) != "":
		opts.Token, opts.ProjectToken = os.Getenv(EnvProjectToken), true
	default:
		opts.Token = os.Getenv(EnvAPIToken)
	}
	if opts.EnvironmentID == "" {
		opts.EnvironmentID = os.Getenv(EnvEnvironment)
	}
	if opts.Endpoint == "" {
		opts.Endpoint = os.Getenv(EnvEndpoint)
	}
	if opts.ExecEndpoint == "" {
		opts.ExecEndpoint = os.Getenv(EnvExecEndpoint)
	}
	switch strings.ToLower(s.Network) {
	case "", "isolated":
	case "private":
		opts.Private = true
	case "none", "deny", "deny-all":
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", "provider.railway.network %q: %s", s.Network, denyRefusal)
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", `provider.railway.network %q: want "isolated" or "private"`, s.Network)
	}
	if s.IdleTimeoutMinutes != nil && *s.IdleTimeoutMinutes < 0 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", "provider.railway.idleTimeoutMinutes %d: want minutes, 0 to disable", *s.IdleTimeoutMinutes)
	}
	if s.Heartbeat != "" {
		d, err := time.ParseDuration(s.Heartbeat)
		if err != nil || d <= 0 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", "provider.railway.heartbeat %q: want a duration such as 5m", s.Heartbeat)
		}
		opts.Heartbeat = d
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
		Summary: "Railway sandboxes (RAILWAY_API_TOKEN or RAILWAY_TOKEN, RAILWAY_ENVIRONMENT_ID)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{Token: "-", EnvironmentID: "-"})
			return p.Capabilities()
		},
		Section: registry.SectionOf[Section]("provider.railway"),
		Flags: []registry.Flag{
			{Name: "environment", Usage: "the Railway environment id (default " + EnvEnvironment + ")"},
			{Name: "region", Usage: "the region sandboxes run in (default Railway's)"},
			{Name: "idle-timeout", Usage: "minutes idle before Railway destroys a sandbox (0 is off; default the plan's 30)"},
			{Name: "network", Usage: `isolated (default) or private (the environment's network); "none" is refused: both keep public egress`},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			s := Section{EnvironmentID: v["environment"], Region: v["region"], Network: v["network"]}
			switch strings.ToLower(s.Network) {
			case "none", "deny", "deny-all":
				return nil, registry.FlagError("network", errors.New(denyRefusal))
			}
			if it := v["idle-timeout"]; it != "" {
				n, err := strconv.Atoi(it)
				if err != nil || n < 0 {
					return nil, registry.FlagError("idle-timeout", fmt.Errorf("want minutes (0 is off), not %q", it))
				}
				s.IdleTimeoutMinutes = &n
			}
			return s.Provider(registry.BuildOptions{Logger: o.Logger})
		},
	})
}

// Managed is a Provider with the registry's management interfaces.
type Managed struct{ *Provider }

var (
	_ registry.Lister         = Managed{}
	_ registry.Pruner         = Managed{}
	_ registry.Pinger         = Managed{}
	_ registry.SnapshotLister = Managed{}
)

// Sandbox is one of corral's sandboxes as List finds it.
type Sandbox struct {
	SandboxInfo
	// Key is the CORRAL_SANDBOX_KEY variable it was created with.
	Key string `json:"key,omitempty"`
}

// all returns every sandbox in the environment, all pages.
func (p *Provider) all(ctx context.Context) ([]SandboxInfo, error) {
	var out []SandboxInfo
	vars := map[string]any{"environmentId": p.env(), "first": 100}
	for {
		var ans struct {
			Sandboxes struct {
				Edges []struct {
					Node SandboxInfo `json:"node"`
				} `json:"edges"`
				PageInfo struct {
					HasNextPage bool    `json:"hasNextPage"`
					EndCursor   *string `json:"endCursor"`
				} `json:"pageInfo"`
			} `json:"sandboxes"`
		}
		if err := p.gql(ctx, Name+".list", p.env(), qSandboxes, vars, true, &ans); err != nil {
			return nil, err
		}
		for _, e := range ans.Sandboxes.Edges {
			out = append(out, e.Node)
		}
		pi := ans.Sandboxes.PageInfo
		if !pi.HasNextPage || pi.EndCursor == nil || *pi.EndCursor == "" || len(ans.Sandboxes.Edges) == 0 {
			return out, nil
		}
		vars["after"] = *pi.EndCursor
	}
}

// List returns corral's sandboxes in the environment, newest first.
// Railway's listing carries no name, label or variables, so each RUNNING
// sandbox is asked for its CORRAL and CORRAL_SANDBOX_KEY variables with
// one command (a shell token and an exec socket); a sandbox that is not
// running, or does not answer, cannot be shown to be corral's and is left
// out.
func (p *Provider) List(ctx context.Context) ([]Sandbox, error) {
	infos, err := p.all(ctx)
	if err != nil {
		return nil, err
	}
	var out []Sandbox
	for _, info := range infos {
		if info.Status != "RUNNING" {
			continue
		}
		h := &handle{p: p, id: info.ID, info: info}
		stdout, code, err := h.bare(ctx, Name+".list", `printf '%s\n%s' "${`+VarManaged+`-}" "${`+VarKey+`-}"`)
		if err != nil {
			if ctx.Err() != nil {
				return nil, sandbox.Wrap(sandbox.Canceled, Name+".list", "", ctx.Err())
			}
			p.log.Debug("railway list: a sandbox did not answer", "sandbox", info.ID, "err", err)
			continue
		}
		managed, key, _ := strings.Cut(string(stdout), "\n")
		if code != 0 || managed != "1" {
			continue
		}
		out = append(out, Sandbox{SandboxInfo: info, Key: key})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
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
		created, _ := time.Parse(time.RFC3339Nano, s.CreatedAt)
		out = append(out, registry.Sandbox{ID: s.ID, Key: s.Key, State: s.Status, CreatedAt: created.UTC(), Detail: s})
	}
	return out, nil
}

// ListSnapshots lists corral's checkpoints (named corral-…), newest first.
func (m Managed) ListSnapshots(ctx context.Context) ([]registry.Snapshot, error) {
	cps, err := m.checkpoints(ctx)
	if err != nil {
		return nil, err
	}
	var out []registry.Snapshot
	for _, c := range cps {
		if !strings.HasPrefix(c.Key, CheckpointPrefix) {
			continue
		}
		created, _ := time.Parse(time.RFC3339Nano, c.CreatedAt)
		out = append(out, registry.Snapshot{Snapshot: sandbox.Snapshot{ID: c.Key, CreatedAt: created.UTC()}, Detail: c})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// Prune destroys corral's sandboxes and deletes corral's checkpoints
// older than o.OlderThan (running sandboxes too unless o.KeepRunning: every
// listed sandbox is running). Railway has no hook that deletes a
// checkpoint with its sandbox, so corral's own (corral-…) are pruned here.
func (m Managed) Prune(ctx context.Context, o registry.PruneOptions) (registry.PruneReport, error) {
	rep := registry.PruneReport{Sandboxes: []string{}, Snapshots: []string{}}
	old := func(t time.Time) bool { return o.OlderThan <= 0 || time.Since(t) >= o.OlderThan }
	if !o.KeepRunning {
		list, err := m.ListSandboxes(ctx)
		if err != nil {
			return rep, err
		}
		for _, s := range list {
			if !old(s.CreatedAt) {
				continue
			}
			if !o.DryRun {
				if err := m.Destroy(ctx, s.ID); err != nil {
					return rep, err
				}
			}
			rep.Sandboxes = append(rep.Sandboxes, s.ID)
		}
	}
	snaps, err := m.ListSnapshots(ctx)
	if err != nil {
		return rep, err
	}
	for _, s := range snaps {
		if !old(s.CreatedAt) {
			continue
		}
		if !o.DryRun {
			if err := m.deleteCheckpoint(ctx, s.Detail.(CheckpointInfo)); err != nil {
				return rep, err
			}
		}
		rep.Snapshots = append(rep.Snapshots, s.ID)
	}
	return rep, nil
}

// Ping checks that backboard answers with the token for the environment
// (a one-item listing).
func (m Managed) Ping(ctx context.Context) error {
	return m.gql(ctx, Name+".ping", m.env(), qSandboxes, map[string]any{"environmentId": m.env(), "first": 1}, true, nil)
}
