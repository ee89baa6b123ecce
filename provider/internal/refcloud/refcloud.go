package refcloud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "refcloud"

// KillStrategy is how a process tree is killed.
type KillStrategy int

// Kill strategies.
const (
	// KillGroup is execproc's group kill (a kill script run as a second
	// command); the provider claims killableProcesses.
	KillGroup KillStrategy = iota
	// KillNativePID is execproc.PIDOnly over the backend's signal
	// endpoint; killableProcesses is not claimed.
	KillNativePID
)

// Options configure the provider.
type Options struct {
	// BaseURL is the backend's API root (the fake's URL). Required.
	BaseURL string
	// Token is the bearer token.
	Token string
	// HTTPClient is the transport; default a plain client.
	HTTPClient *http.Client
	// Timeout bounds one REST call, retries included. Default 30s.
	Timeout time.Duration
	// Kill is the kill strategy. Default KillGroup.
	Kill KillStrategy
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines and background kill failures.
	Logger *slog.Logger
}

// Provider is the reference provider.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts.
func New(opts Options) (*Provider, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	if opts.Token != "" {
		h.Set("Authorization", "Bearer "+opts.Token)
	}
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: opts.BaseURL, Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.Timeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log})
	if err != nil {
		return nil, err
	}
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, BackgroundProcesses: true,
		WritableStdin: true, DurableFilesystem: true, KillableProcesses: opts.Kill == KillGroup}
	return &Provider{opts: opts, c: c, caps: caps, log: log}, nil
}

// Name returns "refcloud".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Create makes a sandbox named opts.ID (or a fresh name), labelled as
// corral's. A create whose outcome is unknown is reconciled by name.
// opts.Env stays in the handle; opts.SourceDir is uploaded through the FS.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	name := opts.ID
	if name == "" {
		name = "corral-" + randomHex(8)
	}
	labels := map[string]string{}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "1"
	var sb Sandbox
	req := cloudhttp.Request{Op: Name + ".create", ID: name, Method: http.MethodPost, Path: "/v1/sandboxes",
		JSON: CreateRequest{Name: name, Labels: labels}}
	err := p.c.Create(ctx, req, &sb, func(ctx context.Context) (bool, error) {
		found, err := p.lookup(ctx, name)
		if err != nil || found == nil {
			return false, err
		}
		sb = *found
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

// lookup finds corral's sandbox named name; nil when there is none.
func (p *Provider) lookup(ctx context.Context, name string) (*Sandbox, error) {
	var list ListResponse
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".lookup", ID: name, Method: http.MethodGet, Path: "/v1/sandboxes",
		Query: url.Values{"name": {name}, "label": {LabelManaged + "=1"}}}, &list)
	if err != nil {
		return nil, err
	}
	for _, sb := range list.Sandboxes {
		if sb.Name == name {
			return &sb, nil
		}
	}
	return nil, nil
}

// Resume reopens the sandbox with id; a sandbox that is gone is NotFound.
// Its environment is empty until SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".resume", id, "empty sandbox id")
	}
	var sb Sandbox
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".resume", ID: id, Method: http.MethodGet,
		Path: "/v1/sandboxes/" + url.PathEscape(id)}, &sb); err != nil {
		return nil, err
	}
	return p.newHandle(sb, nil), nil
}

// Destroy deletes the sandbox; one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete,
		Path: "/v1/sandboxes/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
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
