package blaxel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "blaxel"

// DefaultAPIURL is the control plane @blaxel/core calls (BL_API_URL
// overrides it there).
const DefaultAPIURL = "https://api.blaxel.ai/v0"

// DefaultImage is the image sandboxes start from.
const DefaultImage = "blaxel/base-image:latest"

// Labels corral sets on its sandboxes: LabelManaged marks them, LabelKey
// carries the key (or its digest when it does not fit a label),
// LabelAttempt the create attempt that made the sandbox.
const (
	LabelManaged = "corral"
	LabelKey     = "corral-key"
	LabelAttempt = "corral-create-attempt"
)

// MaxNameLen is the longest sandbox name Blaxel takes.
const MaxNameLen = 49

// Options configure the provider.
type Options struct {
	// APIKey is the Blaxel API key (BL_API_KEY). Required.
	APIKey string
	// Workspace is the workspace sandboxes live in (BL_WORKSPACE).
	// Required.
	Workspace string
	// APIURL is the control plane's root; default DefaultAPIURL.
	APIURL string
	// Region is where sandboxes run (BL_REGION); "" is Blaxel's default.
	Region string
	// Image is the sandbox image; default DefaultImage.
	Image string
	// Memory is the sandbox's memory in MB; default 2048.
	Memory int
	// TTL is how long a sandbox lives before Blaxel deletes it; default 1h.
	// NoTTL opts out (the sandbox lives until Destroy).
	TTL   time.Duration
	NoTTL bool
	// Workdir is the workspace: absolute, or "~/…" relative to the
	// sandbox user's home. Default /workspace.
	Workdir string
	// PublicPreviews makes ConnectPort's previews public; by default they
	// are private and come with a token header.
	PublicPreviews bool
	// PreviewTTL is a private preview token's lifetime; default 1h.
	PreviewTTL time.Duration
	// ReconcilePolls bounds how often a create whose outcome is unknown
	// looks the name up (a pause of a second between looks); default 30.
	ReconcilePolls int
	// HTTPClient is the transport.
	HTTPClient *http.Client
	// CallTimeout bounds one REST call, retries included. Default 60s.
	CallTimeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them); Sleep also
	// paces the reconcile polls.
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines.
	Logger *slog.Logger
}

// Provider is the Blaxel sandbox provider.
type Provider struct {
	opts   Options
	c      *cloudhttp.Client
	header http.Header
	caps   sandbox.Capabilities
	log    *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing key or workspace is an error
// naming its variable.
func New(opts Options) (*Provider, error) {
	for _, m := range []struct{ v, name string }{{opts.APIKey, "BL_API_KEY"}, {opts.Workspace, "BL_WORKSPACE"}} {
		if m.v == "" {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
				"Blaxel needs %s (BL_API_KEY: an API key from app.blaxel.ai, BL_WORKSPACE: the workspace the sandboxes live in)", m.name)
		}
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.Memory <= 0 {
		opts.Memory = 2048
	}
	if opts.TTL <= 0 {
		opts.TTL = time.Hour
	}
	if opts.Workdir == "" {
		opts.Workdir = "/workspace"
	}
	if !strings.HasPrefix(opts.Workdir, "/") && !strings.HasPrefix(opts.Workdir, "~/") {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "workdir %q: want an absolute path or ~/…", opts.Workdir)
	}
	if opts.PreviewTTL <= 0 {
		opts.PreviewTTL = time.Hour
	}
	if opts.ReconcilePolls <= 0 {
		opts.ReconcilePolls = 30
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.Sleep == nil {
		opts.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	h.Set("X-Blaxel-Authorization", "Bearer "+opts.APIKey)
	h.Set("X-Blaxel-Workspace", opts.Workspace)
	h.Set("User-Agent", "corral-provider-blaxel/1")
	p := &Provider{opts: opts, header: h, log: log,
		caps: sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
			KillableProcesses: true, DurableFilesystem: true}}
	c, err := p.client(opts.APIURL)
	if err != nil {
		return nil, err
	}
	p.c = c
	return p, nil
}

// client is a cloudhttp client for base (the control plane, or one
// sandbox's own API) with the auth headers.
func (p *Provider) client(base string) (*cloudhttp.Client, error) {
	return cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: strings.TrimRight(base, "/"), Header: p.header.Clone(),
		HTTPClient: p.opts.HTTPClient, Timeout: p.opts.CallTimeout, Sleep: p.opts.Sleep, Jitter: p.opts.Jitter, Log: p.log,
		RequestIDHeaders: []string{"X-Blaxel-Request-Id", "X-Request-Id"}})
}

// Name returns "blaxel".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Create makes a sandbox named after opts.ID (SandboxName), labelled as
// corral's with this attempt's label, and makes the workspace. A create
// whose outcome is unknown (no answer, 408, 409, 425, 429, 5xx — the edge
// answers 504 to creates the control plane accepted) is reconciled by
// polling the name: a sandbox carrying this attempt's label is ours (and
// is deleted if it failed or the caller gave up), any other is not ours
// and is never deleted. opts.Env stays in the handle and is never written
// into the sandbox's configuration.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	if opts.Network == sandbox.NetworkDeny {
		return nil, sandbox.Unsupported(Name, "networkPolicy")
	}
	name := SandboxName(opts.ID)
	attempt := randomHex(12)
	labels := map[string]string{}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "1"
	labels[LabelAttempt] = attempt
	if opts.ID != "" {
		labels[LabelKey] = labelValue(opts.ID)
	}
	sb, err := p.create(ctx, name, attempt, labels)
	if err != nil {
		return nil, err
	}
	h, err := p.open(ctx, Name+".create", sb, opts.Env)
	if err == nil && opts.SourceDir != "" {
		if uerr := sandbox.UploadDir(ctx, h.fs, opts.SourceDir, Name); uerr != nil {
			err = sandbox.Wrap(sandbox.Internal, Name+".create", name, uerr)
		}
	}
	if err != nil {
		p.cleanup(ctx, name, attempt)
		return nil, err
	}
	return h, nil
}

// unknownOutcome reports an answer after which the create may or may not
// have happened.
func unknownOutcome(err error) bool {
	switch st := cloudhttp.StatusOf(err); {
	case st == 0:
		c := sandbox.CodeOf(err)
		return c == sandbox.Unavailable || c == sandbox.DeadlineExceeded
	case st == http.StatusRequestTimeout, st == http.StatusConflict, st == http.StatusTooEarly, st == http.StatusTooManyRequests, st >= 500:
		return true
	}
	return false
}

// create sends the create up to three times, reconciling each unknown
// outcome by name before trying again.
func (p *Provider) create(ctx context.Context, name, attempt string, labels map[string]string) (*Sandbox, error) {
	runtime := Runtime{Image: p.opts.Image, Memory: p.opts.Memory, Generation: "mk3", Envs: []Env{}}
	if !p.opts.NoTTL {
		runtime.TTL = formatTTL(p.opts.TTL)
	}
	body := Sandbox{Metadata: Metadata{Name: name, Labels: labels}, Spec: Spec{Region: p.opts.Region, Runtime: &runtime}}
	op := Name + ".create"
	var last error
	for try := 0; try < 3; try++ {
		var sb Sandbox
		_, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: name, Method: http.MethodPost, Path: "/sandboxes", JSON: body}, &sb)
		if err == nil {
			if gone(sb.Status) {
				p.cleanup(ctx, name, attempt)
				last = sandbox.Errorf(sandbox.Unavailable, op, name, "blaxel sandbox %s is %s right after its create", name, sb.Status)
				continue
			}
			return &sb, nil
		}
		if !unknownOutcome(err) {
			return nil, err
		}
		last = err
		got, found, rerr := p.reconcile(ctx, name, attempt, cloudhttp.StatusOf(err) == http.StatusConflict)
		if rerr != nil {
			return nil, sandbox.Wrap(sandbox.CodeOf(rerr), op, name, fmt.Errorf("the create's outcome is unknown (%v): %w", err, rerr))
		}
		if found {
			return got, nil
		}
		if err := p.opts.Sleep(ctx, time.Second); err != nil {
			return nil, sandbox.Wrap(sandbox.Canceled, op, name, err)
		}
	}
	return nil, last
}

// errNotOurs is reconcile's error for a name held by a sandbox this
// attempt did not make.
func (p *Provider) errNotOurs(name string, sb *Sandbox) error {
	return sandbox.Errorf(sandbox.AlreadyExists, Name+".create", name,
		"blaxel sandbox %s exists and was not made by this create (status %s); it is left alone", name, sb.Status)
}

// reconcile polls the name until a sandbox carrying this attempt's label
// is deployed (found), is gone (deleted; not found: create again), or the
// polls run out. A sandbox without the label is someone else's: with a
// 409 that is final (AlreadyExists), never deleted.
func (p *Provider) reconcile(ctx context.Context, name, attempt string, conflict bool) (*Sandbox, bool, error) {
	op := Name + ".create"
	for i := 0; i < p.opts.ReconcilePolls; i++ {
		if i > 0 {
			if err := p.opts.Sleep(ctx, time.Second); err != nil {
				p.cleanup(ctx, name, attempt)
				return nil, false, sandbox.Wrap(sandbox.Canceled, op, name, err)
			}
		}
		sb, err := p.read(ctx, op, name)
		switch {
		case sandbox.CodeOf(err) == sandbox.NotFound:
			if !conflict && i >= 2 {
				return nil, false, nil // never made: create again
			}
			continue
		case err != nil:
			if ctx.Err() != nil {
				p.cleanup(ctx, name, attempt)
			}
			return nil, false, err
		}
		if sb.Metadata.Labels[LabelAttempt] != attempt {
			if gone(sb.Status) {
				continue // a dying sandbox of the same name: wait, then create again
			}
			return nil, false, p.errNotOurs(name, sb)
		}
		switch {
		case sb.Status == "DEPLOYED":
			return sb, true, nil
		case gone(sb.Status):
			p.cleanup(ctx, name, attempt)
			return nil, false, nil
		}
	}
	p.cleanup(ctx, name, attempt)
	return nil, false, sandbox.Errorf(sandbox.Unavailable, op, name, "blaxel sandbox %s did not settle after %d looks", name, p.opts.ReconcilePolls)
}

// cleanup deletes the sandbox named name only if it carries this
// attempt's label.
func (p *Provider) cleanup(ctx context.Context, name, attempt string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	sb, err := p.read(dctx, Name+".create", name)
	if err != nil || sb.Metadata.Labels[LabelAttempt] != attempt {
		return
	}
	_ = p.Destroy(dctx, name)
}

// read gets a sandbox by name (any status).
func (p *Provider) read(ctx context.Context, op, name string) (*Sandbox, error) {
	var sb Sandbox
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: name, Method: http.MethodGet, Path: "/sandboxes/" + url.PathEscape(name)}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// GoneStatuses are the statuses in which a sandbox counts as deleted.
var GoneStatuses = []string{"DELETING", "TERMINATED", "TERMINATING", "FAILED", "DEACTIVATING", "DEACTIVATED"}

func gone(status string) bool {
	for _, s := range GoneStatuses {
		if s == status {
			return true
		}
	}
	return false
}

// Resume reopens the sandbox named id; one that is gone (GoneStatuses) or
// missing is NotFound. Its environment is empty until SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	op := Name + ".resume"
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox name")
	}
	sb, err := p.read(ctx, op, id)
	if err != nil {
		return nil, err
	}
	if gone(sb.Status) {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "blaxel sandbox %s is %s", id, sb.Status)
	}
	return p.open(ctx, op, sb, nil)
}

// Destroy deletes the sandbox; one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete, Path: "/sandboxes/" + url.PathEscape(id)}, nil)
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

// SandboxName is the Blaxel name for a sandbox key: the key itself when it
// is already DNS-safe (lowercase letters, digits and inner '-') and at most
// MaxNameLen long; otherwise a cleaned, lowercased prefix and a 24-hex
// sha256 of the key, so two keys never share a name. "" gets a fresh name.
func SandboxName(key string) string {
	if key == "" {
		return "corral-" + randomHex(8)
	}
	okRune := func(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' }
	ok := len(key) <= MaxNameLen && !strings.HasPrefix(key, "-") && !strings.HasSuffix(key, "-")
	for _, r := range key {
		ok = ok && okRune(r)
	}
	if ok {
		return key
	}
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if b.Len() >= MaxNameLen-25 {
			break
		}
		if okRune(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(key))
	prefix := strings.Trim(b.String(), "-")
	for strings.Contains(prefix, "--") {
		prefix = strings.ReplaceAll(prefix, "--", "-")
	}
	if prefix == "" {
		return "k-" + hex.EncodeToString(sum[:12])
	}
	return prefix + "-" + hex.EncodeToString(sum[:12])
}

// labelValue keeps a key readable in a label (bounded to 63 bytes).
func labelValue(key string) string {
	if len(key) <= 63 {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return key[:38] + "-" + hex.EncodeToString(sum[:12])
}

// formatTTL writes d as Blaxel's duration ("1h", "90m", "45s").
func formatTTL(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", (d+time.Second-1)/time.Second)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
