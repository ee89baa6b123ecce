package cloudflare

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "cloudflare"

// Options configure the provider.
type Options struct {
	// URL is the bridge Worker's base URL
	// (https://corral-bridge.<account>.workers.dev). Required.
	URL string
	// Token is the bridge's bearer token (the Worker's BRIDGE_TOKEN
	// secret). Required.
	Token string
	// HTTPClient is the transport; default a plain client.
	HTTPClient *http.Client
	// Timeout bounds one REST call, retries included. Default 60s (a cold
	// container start happens inside the first call).
	Timeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines and background kill failures.
	Logger *slog.Logger
}

// Provider runs sandboxes through the bridge Worker.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing URL or token is a
// FailedPrecondition naming what is missing.
func New(opts Options) (*Provider, error) {
	if opts.URL == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
			"Cloudflare needs the bridge Worker's URL (provider.cloudflare.url or %s; deploy provider/cloudflare/bridge with wrangler deploy)", EnvURL)
	}
	if opts.Token == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
			"Cloudflare needs the bridge token (%s, the value given to wrangler secret put BRIDGE_TOKEN)", EnvToken)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+opts.Token)
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: strings.TrimRight(opts.URL, "/"), Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.Timeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log})
	if err != nil {
		return nil, err
	}
	return &Provider{opts: opts, c: c, caps: Capabilities(), log: log}, nil
}

// Capabilities are the provider's: files, exec, env and background
// processes; killableProcesses because the bridge starts every command as
// a session leader and the kill script signals its group (measured
// against the fake); no writable stdin (the SDK's exec takes none: the
// bridge stages Exec's stdin in a file), no durable filesystem (a cold
// start may wipe the container's disk), no snapshots, ports, fork or
// network policy.
func Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{FS: true, Exec: true, Env: true, BackgroundProcesses: true, KillableProcesses: true}
}

// Name returns "cloudflare".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// SandboxID is the Durable Object name for key: key itself when it is
// already lowercase DNS-safe and at most 63 characters, otherwise a
// cleaned prefix and a digest of the whole key.
func SandboxID(key string) string {
	if idRE.MatchString(key) {
		return key
	}
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	prefix := strings.Trim(b.String(), "-")
	if len(prefix) > 46 {
		prefix = strings.TrimRight(prefix[:46], "-")
	}
	sum := sha256.Sum256([]byte(key))
	d := hex.EncodeToString(sum[:8])
	if prefix == "" {
		return "k-" + d
	}
	return prefix + "-" + d
}

// Create makes the sandbox for opts.ID (or a fresh id), labelled as
// corral's. A create whose outcome is unknown is reconciled by id.
// opts.Env stays in the handle; opts.SourceDir is uploaded through the FS.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	id := "corral-" + randomHex(8)
	labels := map[string]string{}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	if opts.ID != "" {
		id = SandboxID(opts.ID)
		if id != opts.ID {
			labels[LabelKey] = opts.ID
		}
	}
	labels[LabelManaged] = "1"
	var sb Sandbox
	req := cloudhttp.Request{Op: Name + ".create", ID: id, Method: http.MethodPost, Path: "/v1/sandboxes",
		JSON: CreateRequest{ID: id, Labels: labels}}
	err := p.c.Create(ctx, req, &sb, func(ctx context.Context) (bool, error) {
		found, err := p.get(ctx, Name+".lookup", id)
		if sandbox.CodeOf(err) == sandbox.NotFound {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		sb = found
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	h := p.newHandle(sb, opts.Env)
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.FS(), opts.SourceDir, Name); err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			_ = p.Destroy(dctx, sb.ID)
			return nil, sandbox.Wrap(sandbox.Internal, Name+".create", sb.ID, err)
		}
	}
	return h, nil
}

func (p *Provider) get(ctx context.Context, op, id string) (Sandbox, error) {
	var sb Sandbox
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: id, Method: http.MethodGet,
		Path: "/v1/sandboxes/" + url.PathEscape(id)}, &sb)
	return sb, err
}

// Resume reopens the sandbox with id; one the bridge no longer knows is
// NotFound. Its environment is empty until SetEnv, and its files may be
// gone (a cold start wipes the container's disk: durableFilesystem is
// false).
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".resume", id, "empty sandbox id")
	}
	sb, err := p.get(ctx, Name+".resume", id)
	if err != nil {
		return nil, err
	}
	return p.newHandle(sb, nil), nil
}

// Destroy destroys the sandbox's container and forgets it; one that is
// gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete,
		Path: "/v1/sandboxes/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// List returns corral's sandboxes (label corral=1), oldest first.
func (p *Provider) List(ctx context.Context) ([]Sandbox, error) {
	var list ListResponse
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/v1/sandboxes",
		Query: url.Values{"label": {LabelManaged + "=1"}}}, &list)
	return list.Sandboxes, err
}

// RestoreSnapshot is unsupported.
func (p *Provider) RestoreSnapshot(context.Context, string, sandbox.CreateOptions) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "snapshots")
}

// DeleteSnapshot is unsupported.
func (p *Provider) DeleteSnapshot(context.Context, string) error {
	return sandbox.Unsupported(Name, "snapshots")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
