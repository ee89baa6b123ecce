package e2b

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "e2b"

// APIKeyEnv is the variable the API key is read from.
const APIKeyEnv = "E2B_API_KEY"

// Defaults.
const (
	DefaultDomain   = "e2b.app"
	DefaultTemplate = "base"
	DefaultTimeout  = 30 * time.Minute
	DefaultWorkdir  = "~/workspace"
	DefaultUser     = "user"
)

// Options configure the provider.
type Options struct {
	// APIKey is the team's API key (X-API-KEY). Required; never logged.
	APIKey string
	// Domain is E2B's domain. Default e2b.app.
	Domain string
	// APIURL is the control plane's root. Default https://api.<Domain>.
	APIURL string
	// SandboxURL, when set, is the one base URL of every sandbox's envd
	// (the SDK's sandboxUrl, E2B_SANDBOX_URL), which routes by the
	// E2b-Sandbox-Id header; tests point it at the fake. Default: for
	// E2B's own domains https://sandbox.<Domain> (the SDK 2.51.0's
	// choice), else https://49983-<id>.<domain>.
	SandboxURL string
	// Template is the template a sandbox is created from. Default base.
	Template string
	// Timeout is the sandbox's time to live, renewed by Resume (connect
	// only extends it). Default 30m.
	Timeout time.Duration
	// Workdir is the workspace: absolute, or relative to the user's home
	// ("~/…"). Default ~/workspace, /home/user/workspace for E2B's user
	// (/workspace is not writable for user).
	Workdir string
	// User runs commands (envd's Basic auth user). Default user.
	User string
	// AllowPublicTraffic false makes the sandbox's URLs need the traffic
	// token (ConnectPort then returns it as a header). Default true.
	AllowPublicTraffic *bool
	// HTTPClient is the transport; default a plain client.
	HTTPClient *http.Client
	// RequestTimeout bounds one REST call, retries included. Default 60s.
	RequestTimeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// PortURL, when set, replaces https://<port>-<id>.<domain> in
	// ConnectPort (tests point it at the fake's port proxy).
	PortURL func(id, domain string, port int) string
	// Logger receives debug lines, never a secret.
	Logger *slog.Logger
}

// Provider is the E2B provider.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing key is InvalidArgument
// naming E2B_API_KEY.
func New(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".new", "", "E2B needs %s (the API key of your team, from the E2B dashboard)", APIKeyEnv)
	}
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	if opts.APIURL == "" {
		opts.APIURL = "https://api." + opts.Domain
	}
	if opts.Template == "" {
		opts.Template = DefaultTemplate
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Workdir == "" {
		opts.Workdir = DefaultWorkdir
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	opts.Logger = log
	h := http.Header{}
	h.Set(HeaderAPIKey, opts.APIKey)
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: opts.APIURL, Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.RequestTimeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log})
	if err != nil {
		return nil, err
	}
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		WritableStdin: true, KillableProcesses: true, Snapshots: true, NetworkPolicy: true,
		DurableFilesystem: true, Fork: true}
	return &Provider{opts: opts, c: c, caps: caps, log: log}, nil
}

// Name returns "e2b".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

func (p *Provider) seconds() int { return int(p.opts.Timeout / time.Second) }

// Create makes a sandbox from the template, its key (opts.ID, or a fresh
// one) and labels in metadata, internet access off for NetworkDeny. A
// create whose outcome is unknown is reconciled by the key's metadata.
// opts.Env stays in the handle; opts.SourceDir is uploaded through the FS.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	return p.create(ctx, p.opts.Template, opts)
}

func (p *Provider) create(ctx context.Context, template string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	key := opts.ID
	if key == "" {
		key = "corral-" + randomHex(8)
	}
	meta := map[string]string{}
	for k, v := range opts.Labels {
		meta[k] = v
	}
	meta[MetaManaged], meta[MetaKey] = "1", key
	body := NewSandbox{TemplateID: template, Timeout: p.seconds(), Metadata: meta}
	if opts.Network == sandbox.NetworkDeny {
		f := false
		body.AllowInternetAccess = &f
	}
	if p.opts.AllowPublicTraffic != nil {
		body.Network = &NetworkConfig{AllowPublicTraffic: p.opts.AllowPublicTraffic}
	}
	if len(opts.Egress) > 0 {
		allow, err := egressAllowOut(opts.Egress)
		if err != nil {
			return nil, err
		}
		if body.Network == nil {
			body.Network = &NetworkConfig{}
		}
		body.Network.AllowOut, body.Network.DenyOut = allow, []string{allTraffic}
	}
	var sb Sandbox
	req := cloudhttp.Request{Op: Name + ".create", ID: key, Method: http.MethodPost, Path: "/v2/sandboxes", JSON: body}
	err := p.c.Create(ctx, req, &sb, func(ctx context.Context) (bool, error) {
		found, err := p.findByKey(ctx, key)
		if err != nil || found == "" {
			return false, err
		}
		got, err := p.connect(ctx, found)
		if err != nil {
			return false, err
		}
		sb = got
		return true, nil
	})
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			return nil, sandbox.Errorf(sandbox.NotFound, Name+".create", template, "E2B has no template or snapshot %q", template)
		}
		return nil, err
	}
	h, err := p.open(ctx, sb, opts.Env, true)
	if err == nil && opts.SourceDir != "" {
		err = h.uploadSource(ctx, opts.SourceDir)
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = p.Destroy(dctx, sb.SandboxID)
		return nil, sandbox.Wrap(sandbox.CodeOf(err), Name+".create", sb.SandboxID, err)
	}
	return h, nil
}

// findByKey returns the id of corral's sandbox whose key is key, or "".
func (p *Provider) findByKey(ctx context.Context, key string) (string, error) {
	list, err := p.list(ctx, map[string]string{MetaManaged: "1", MetaKey: key})
	if err != nil || len(list) == 0 {
		return "", err
	}
	return list[0].SandboxID, nil
}

// list returns the sandboxes (running and paused) whose metadata has
// every pair of meta, every page.
func (p *Provider) list(ctx context.Context, meta map[string]string) ([]SandboxDetail, error) {
	mq := url.Values{}
	for k, v := range meta {
		mq.Set(k, v)
	}
	var out []SandboxDetail
	next := ""
	for range 100 {
		q := url.Values{"metadata": {mq.Encode()}, "state": {"running,paused"}, "limit": {"100"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		var page []SandboxDetail
		resp, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".list", Method: http.MethodGet, Path: "/v2/sandboxes", Query: q}, &page)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		next = resp.Header.Get("X-Next-Token")
		if next == "" || len(page) == 0 {
			break
		}
	}
	return out, nil
}

// connect is POST /v2/sandboxes/{id}/connect: it resumes a paused
// sandbox and extends (never shortens) its timeout.
func (p *Provider) connect(ctx context.Context, id string) (Sandbox, error) {
	var sb Sandbox
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".resume", ID: id, Method: http.MethodPost,
		Path: "/v2/sandboxes/" + url.PathEscape(id) + "/connect", JSON: ConnectRequest{Timeout: p.seconds()}, Idempotent: true}, &sb)
	return sb, err
}

// Resume reopens the sandbox with id (E2B's id, or corral's key, found
// by metadata), resuming it when paused; a sandbox that is gone is
// NotFound. Its environment is empty until SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".resume", id, "empty sandbox id")
	}
	sb, err := p.connect(ctx, id)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		found, ferr := p.findByKey(ctx, id)
		if ferr != nil {
			return nil, ferr
		}
		if found == "" {
			return nil, err
		}
		sb, err = p.connect(ctx, found)
	}
	if err != nil {
		return nil, err
	}
	return p.open(ctx, sb, nil, false)
}

// Destroy kills the sandbox; one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete,
		Path: "/sandboxes/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// RestoreSnapshot creates a sandbox from the snapshot (a template on E2B);
// the network policy of opts is applied again.
func (p *Provider) RestoreSnapshot(ctx context.Context, id string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".restore", id, "empty snapshot id")
	}
	return p.create(ctx, id, opts)
}

// DeleteSnapshot deletes the snapshot's template; one that is gone is
// fine.
func (p *Provider) DeleteSnapshot(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".deleteSnapshot", ID: id, Method: http.MethodDelete,
		Path: "/templates/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// snapshotName is a snapshot template name: lowercase [a-z0-9-], at most
// 63 characters, the sandbox id shortened and never the label.
func snapshotName(id, label string) string {
	clean := func(s string) string {
		var b strings.Builder
		for _, r := range strings.ToLower(s) {
			if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
				b.WriteRune(r)
			} else {
				b.WriteByte('-')
			}
		}
		return strings.Trim(b.String(), "-")
	}
	l := clean(label)
	if len(l) > 32 {
		l = l[:32]
	}
	i := clean(id)
	room := 63 - len("corral--") - len(l) - 7
	if len(i) > room {
		i = i[:max(room, 0)]
	}
	return strings.Trim("corral-"+i+"-"+l, "-") + "-" + randomHex(3)
}
