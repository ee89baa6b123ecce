package vercel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
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
const Name = "vercel"

// DefaultAPIURL is the API root the official SDK calls.
const DefaultAPIURL = "https://vercel.com/api"

// TagManaged marks corral's sandboxes; TagKey carries the sandbox key.
const (
	TagManaged = "corral"
	TagKey     = "corral-key"
)

// Runtimes are the runtimes Vercel Sandbox offers.
var Runtimes = []string{"node24", "node22", "python3.13"}

// Options configure the provider.
type Options struct {
	// Token is the Vercel access token (VERCEL_TOKEN). Required: it is
	// never taken from VERCEL_OIDC_TOKEN behind the caller's back.
	Token string
	// TeamID and ProjectID say where sandboxes live (VERCEL_TEAM_ID,
	// VERCEL_PROJECT_ID). Required.
	TeamID, ProjectID string
	// APIURL is the API's root; default DefaultAPIURL.
	APIURL string
	// Runtime is node24 (default), node22 or python3.13.
	Runtime string
	// Timeout is a session's lifetime before Vercel stops it; default 30
	// minutes (a persistent sandbox resumes on the next Resume).
	Timeout time.Duration
	// Ports are exposed at create (at most 4); ConnectPort adds others.
	Ports []int
	// Vcpus is the sandbox's size (0: Vercel's default, 2).
	Vcpus int
	// Ephemeral makes sandboxes non-persistent: their files die with the
	// session and Resume after a stop is NotFound. Default persistent.
	Ephemeral bool
	// Workdir is the workspace root; default the session's cwd
	// (/vercel/sandbox).
	Workdir string
	// HTTPClient is the transport.
	HTTPClient *http.Client
	// CallTimeout bounds one REST call, retries included. Default 60s.
	CallTimeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines.
	Logger *slog.Logger
}

// Provider is the Vercel Sandbox provider.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing token, team or project is an
// error naming its variable.
func New(opts Options) (*Provider, error) {
	for _, m := range []struct{ v, name string }{{opts.Token, "VERCEL_TOKEN"}, {opts.TeamID, "VERCEL_TEAM_ID"}, {opts.ProjectID, "VERCEL_PROJECT_ID"}} {
		if m.v == "" {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
				"Vercel Sandbox needs %s (VERCEL_TOKEN: an access token from vercel.com/account/tokens; VERCEL_TEAM_ID and VERCEL_PROJECT_ID: where the sandboxes live)", m.name)
		}
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if opts.Runtime == "" {
		opts.Runtime = "node24"
	}
	ok := false
	for _, r := range Runtimes {
		ok = ok || r == opts.Runtime
	}
	if !ok {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "runtime %q: want one of %s", opts.Runtime, strings.Join(Runtimes, ", "))
	}
	if len(opts.Ports) > 4 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "a Vercel sandbox exposes at most 4 ports, not %d", len(opts.Ports))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Minute
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+opts.Token)
	h.Set("User-Agent", "corral-provider-vercel/1")
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: strings.TrimRight(opts.APIURL, "/"), Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.CallTimeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log,
		RequestIDHeaders: []string{"X-Vercel-Id", "X-Request-Id"}})
	if err != nil {
		return nil, err
	}
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		KillableProcesses: true, Snapshots: true, NetworkPolicy: true, DurableFilesystem: !opts.Ephemeral}
	return &Provider{opts: opts, c: c, caps: caps, log: log}, nil
}

// Name returns "vercel".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// call makes a REST call with the team query every call needs.
func (p *Provider) call(ctx context.Context, req cloudhttp.Request, out any) (*cloudhttp.Response, error) {
	req.Query = p.query(req.Query)
	return p.c.Do(ctx, req, out)
}

func (p *Provider) query(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	q.Set("teamId", p.opts.TeamID)
	return q
}

// Create makes a persistent sandbox named after opts.ID (the key), tagged
// as corral's, and makes the workspace directory. A create whose outcome
// is unknown is reconciled by name. opts.Env is kept in the handle and
// never sent to the sandbox's configuration.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	return p.create(ctx, opts, "")
}

func (p *Provider) create(ctx context.Context, opts sandbox.CreateOptions, snapshot string) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	name := SandboxName(opts.ID)
	tags := map[string]string{}
	for k, v := range opts.Labels {
		tags[k] = v
	}
	tags[TagManaged] = "1"
	if opts.ID != "" {
		tags[TagKey] = tagValue(opts.ID)
	}
	req := CreateSandbox{ProjectID: p.opts.ProjectID, Name: name, Runtime: p.opts.Runtime, Ports: append([]int{}, p.opts.Ports...),
		Timeout: p.opts.Timeout.Milliseconds(), Persistent: !p.opts.Ephemeral, Tags: tags}
	if p.opts.Vcpus > 0 {
		req.Resources = &Resources{Vcpus: p.opts.Vcpus}
	}
	switch {
	case opts.Network == sandbox.NetworkDeny:
		req.NetworkPolicy = map[string]string{"mode": "deny-all"}
	case len(opts.Egress) > 0:
		np, err := egressPolicy(opts.Egress)
		if err != nil {
			return nil, err
		}
		req.NetworkPolicy = np
	}
	if snapshot != "" {
		req.Source = &Source{Type: "snapshot", SnapshotID: snapshot}
	}
	var ans SandboxAndSession
	err := p.c.Create(ctx, cloudhttp.Request{Op: Name + ".create", ID: name, Method: http.MethodPost, Path: "/v2/sandboxes",
		Query: p.query(nil), JSON: req}, &ans,
		func(ctx context.Context) (bool, error) {
			got, err := p.get(ctx, Name+".create", name, true)
			if sandbox.CodeOf(err) == sandbox.NotFound {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			ans = *got
			return true, nil
		})
	if err != nil {
		if snapshot != "" && sandbox.CodeOf(err) == sandbox.NotFound {
			return nil, sandbox.Errorf(sandbox.NotFound, Name+".restore", snapshot, "vercel snapshot %s not found", snapshot)
		}
		return nil, err
	}
	h := p.newHandle(ans, opts.Env)
	if err := h.mkdirRoot(ctx, Name+".create"); err != nil {
		p.cleanup(ctx, name)
		return nil, err
	}
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.fs, opts.SourceDir, Name); err != nil {
			p.cleanup(ctx, name)
			return nil, sandbox.Wrap(sandbox.Internal, Name+".create", name, err)
		}
	}
	return h, nil
}

func (p *Provider) cleanup(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = p.Destroy(dctx, name)
}

// get reads a sandbox by name; resume starts a session when none runs.
func (p *Provider) get(ctx context.Context, op, name string, resume bool) (*SandboxAndSession, error) {
	q := url.Values{"projectId": {p.opts.ProjectID}}
	if resume {
		q.Set("resume", "true")
	}
	var ans SandboxAndSession
	if _, err := p.call(ctx, cloudhttp.Request{Op: op, ID: name, Method: http.MethodGet,
		Path: "/v2/sandboxes/" + url.PathEscape(name), Query: q}, &ans); err != nil {
		return nil, err
	}
	if gone(ans.Session.Status) {
		return nil, sandbox.Errorf(sandbox.NotFound, op, name, "vercel sandbox %s is %s", name, ans.Session.Status)
	}
	return &ans, nil
}

// gone reports the session states in which a sandbox counts as deleted.
func gone(status string) bool { return status == "failed" || status == "aborted" }

// Resume reopens the sandbox named id, starting a session when its last
// one stopped (a persistent sandbox keeps its files); a deleted or
// non-persistent stopped sandbox is NotFound. Its environment is empty
// until SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".resume", id, "empty sandbox name")
	}
	ans, err := p.get(ctx, Name+".resume", id, true)
	if err != nil {
		return nil, err
	}
	return p.newHandle(*ans, nil), nil
}

// Destroy deletes the sandbox (not only its session: a persistent sandbox
// that is only stopped would keep its storage); one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.call(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete,
		Path: "/v2/sandboxes/" + url.PathEscape(id), Query: url.Values{"projectId": {p.opts.ProjectID}}}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// RestoreSnapshot creates a sandbox from a snapshot Handle.Snapshot made.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if snapshot == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".restore", "", "empty snapshot id")
	}
	if opts.ID == "" {
		opts.ID = "corral-" + randomHex(8)
	}
	return p.create(ctx, opts, snapshot)
}

// DeleteSnapshot deletes a snapshot; one that is gone is fine.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	_, err := p.call(ctx, cloudhttp.Request{Op: Name + ".deleteSnapshot", ID: snapshot, Method: http.MethodDelete,
		Path: "/v2/sandboxes/snapshots/" + url.PathEscape(snapshot)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// SandboxName is the Vercel name for a sandbox key: the key itself when
// it fits (letters, digits, '-', '_', at most 63), else a cleaned prefix
// and a digest of the key; a fresh name for "".
func SandboxName(key string) string {
	if key == "" {
		return "corral-" + randomHex(8)
	}
	okRune := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_'
	}
	ok := len(key) <= 63
	for _, r := range key {
		ok = ok && okRune(r)
	}
	if ok {
		return key
	}
	var b strings.Builder
	for _, r := range key {
		if b.Len() >= 40 {
			break
		}
		if okRune(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(key))
	return strings.Trim(b.String(), "-") + "-" + hex.EncodeToString(sum[:6])
}

// tagValue keeps a key readable in a tag (bounded to 255 bytes).
func tagValue(key string) string {
	if len(key) <= 255 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return key[:200] + "-" + hex.EncodeToString(sum[:8])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
