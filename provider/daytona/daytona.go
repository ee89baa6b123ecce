package daytona

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "daytona"

// DefaultAPIURL is Daytona's control plane.
const DefaultAPIURL = "https://app.daytona.io/api"

// LabelManaged marks corral's sandboxes; LabelKey carries the sandbox key.
const (
	LabelManaged = "corral"
	LabelKey     = "corral-key"
)

// Options configure the provider.
type Options struct {
	// APIKey is the Daytona API key (DAYTONA_API_KEY). Required.
	APIKey string
	// APIURL is the control plane's root; default DAYTONA_API_URL, else
	// DefaultAPIURL.
	APIURL string
	// Target is the region ("us", "eu"); "" is the organization's default.
	Target string
	// Snapshot is what sandboxes are made from ("" is Daytona's default).
	Snapshot string
	// Workdir is the workspace root in the sandbox; default
	// "<the daemon's work-dir>/workspace" (/home/daytona/workspace on
	// Daytona's images).
	Workdir string
	// AutoStopInterval is Daytona's auto-stop in minutes (0 is off); nil
	// keeps Daytona's default (15).
	AutoStopInterval *int
	// Ephemeral deletes a sandbox as soon as it stops.
	Ephemeral bool
	// HTTPClient is the transport.
	HTTPClient *http.Client
	// Timeout bounds one REST call, retries included. Default 60s.
	Timeout time.Duration
	// StartTimeout bounds waiting for a sandbox to reach "started". Default 3m.
	StartTimeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines.
	Logger *slog.Logger
}

// Provider is the Daytona provider.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	hdr  http.Header
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing key is an error naming
// DAYTONA_API_KEY.
func New(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Daytona needs DAYTONA_API_KEY (an API key from app.daytona.io/dashboard/keys)")
	}
	if opts.APIURL == "" {
		opts.APIURL = os.Getenv("DAYTONA_API_URL")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+opts.APIKey)
	h.Set("X-Daytona-Source", "corral")
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: strings.TrimRight(opts.APIURL, "/"), Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.Timeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log})
	if err != nil {
		return nil, err
	}
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		KillableProcesses: true, Snapshots: true, NetworkPolicy: true, DurableFilesystem: true}
	return &Provider{opts: opts, c: c, hdr: h, caps: caps, log: log}, nil
}

// Name returns "daytona".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Create makes a sandbox named after opts.ID (the key), labelled as
// corral's, and waits until it runs. A create whose outcome is unknown is
// reconciled by name. opts.Env is kept in the handle and never sent.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	return p.create(ctx, opts, p.opts.Snapshot)
}

func (p *Provider) create(ctx context.Context, opts sandbox.CreateOptions, snapshot string) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	name := SandboxName(opts.ID)
	labels := map[string]string{}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	labels[LabelManaged] = "1"
	if opts.ID != "" {
		labels[LabelKey] = labelValue(opts.ID)
	}
	req := CreateSandbox{Name: name, Snapshot: snapshot, Labels: labels, Env: map[string]string{}, Target: p.opts.Target,
		AutoStopInterval: p.opts.AutoStopInterval, NetworkBlockAll: opts.Network == sandbox.NetworkDeny}
	if len(opts.Egress) > 0 {
		var err error
		if req.NetworkAllowList, req.DomainAllowList, err = egressLists(opts.Egress); err != nil {
			return nil, err
		}
	}
	if p.opts.Ephemeral {
		zero := 0
		req.AutoDeleteInterval = &zero
	}
	var sb Sandbox
	err := p.c.Create(ctx, cloudhttp.Request{Op: Name + ".create", ID: name, Method: http.MethodPost, Path: "/sandbox", JSON: req}, &sb,
		func(ctx context.Context) (bool, error) {
			found, err := p.get(ctx, Name+".create", name)
			if sandbox.CodeOf(err) == sandbox.NotFound {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			sb = *found
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	h, err := p.open(ctx, Name+".create", sb, opts.Env, snapshot == "")
	if err != nil {
		p.cleanup(ctx, sb.ID)
		return nil, err
	}
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.fs, opts.SourceDir, Name); err != nil {
			p.cleanup(ctx, sb.ID)
			return nil, sandbox.Wrap(sandbox.Internal, Name+".create", sb.ID, err)
		}
	}
	return h, nil
}

func (p *Provider) cleanup(ctx context.Context, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = p.Destroy(dctx, id)
}

// get reads a sandbox by id or name.
func (p *Provider) get(ctx context.Context, op, idOrName string) (*Sandbox, error) {
	var sb Sandbox
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: idOrName, Method: http.MethodGet,
		Path: "/sandbox/" + url.PathEscape(idOrName)}, &sb); err != nil {
		return nil, err
	}
	return &sb, nil
}

// Resume reopens the sandbox with id (or name); a stopped or archived
// sandbox is started; a destroyed one is NotFound. Its environment is
// empty until SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".resume", id, "empty sandbox id")
	}
	sb, err := p.get(ctx, Name+".resume", id)
	if err != nil {
		return nil, err
	}
	return p.open(ctx, Name+".resume", *sb, nil, false)
}

// open waits for sb to run (starting it when stopped or archived), then
// makes its handle. The workspace root is Options.Workdir, else
// "<GET /work-dir>/workspace" (the create answer does not carry the
// daemon's work dir). It is not made here: every command's launcher makes
// it when it is missing and an upload makes its parents, so a create costs
// no request for it. fresh marks a sandbox this handle made (no command
// ran in it yet, so no link can stand in its workspace).
func (p *Provider) open(ctx context.Context, op string, sb Sandbox, env map[string]string, fresh bool) (*handle, error) {
	ready, err := p.waitStarted(ctx, op, sb)
	if err != nil {
		return nil, err
	}
	h := p.newHandle(*ready, env)
	root := p.opts.Workdir
	if root == "" {
		var wd struct {
			Dir string `json:"dir"`
		}
		if _, err := h.tb.Do(ctx, cloudhttp.Request{Op: op, ID: sb.ID, Method: http.MethodGet, Path: "/work-dir"}, &wd); err != nil {
			return nil, err
		}
		if wd.Dir == "" {
			wd.Dir = "/home/daytona"
		}
		root = strings.TrimRight(wd.Dir, "/") + "/workspace"
	}
	h.setRoot(root)
	if !fresh {
		h.links.Store(true)
	}
	return h, nil
}

// gone reports the states in which a sandbox counts as deleted.
func gone(state string) bool {
	switch state {
	case "destroyed", "destroying", "error", "build_failed":
		return true
	}
	return false
}

// waitStarted returns sb once its state is "started", starting it when
// it is stopped or archived and polling while it moves.
func (p *Provider) waitStarted(ctx context.Context, op string, sb Sandbox) (*Sandbox, error) {
	deadline := time.Now().Add(p.opts.StartTimeout)
	started := false
	for {
		switch {
		case sb.State == "started":
			return &sb, nil
		case gone(sb.State):
			return nil, sandbox.Errorf(sandbox.NotFound, op, sb.ID, "daytona sandbox %s is %s", sb.ID, sb.State)
		case (sb.State == "stopped" || sb.State == "archived" || sb.State == "paused") && !started:
			sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "start", Subject: sb.ID, Where: "daytona", Status: "starting the " + sb.State + " sandbox"})
			var out Sandbox
			if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: sb.ID, Method: http.MethodPost,
				Path: "/sandbox/" + url.PathEscape(sb.ID) + "/start", Idempotent: true}, &out); err != nil {
				return nil, err
			}
			started = true
			if out.ID != "" {
				sb = out
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, sandbox.Errorf(sandbox.DeadlineExceeded, op, sb.ID, "daytona sandbox %s still %q after %v", sb.ID, sb.State, p.opts.StartTimeout)
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, sandbox.Wrap(sandbox.Canceled, op, sb.ID, ctx.Err())
		case <-t.C:
		}
		next, err := p.get(ctx, op, sb.ID)
		if err != nil {
			return nil, err
		}
		sb = *next
	}
}

// Destroy deletes the sandbox; one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete,
		Path: "/sandbox/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// RestoreSnapshot creates a sandbox from a snapshot Handle.Snapshot made.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if snapshot == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".restore", "", "empty snapshot name")
	}
	return p.create(ctx, opts, snapshot)
}

// DeleteSnapshot deletes a snapshot by the name Handle.Snapshot gave it
// (or its id); one that is gone is fine. Daytona's DELETE
// /snapshots/{id} takes the id only, so the name is resolved first with
// GET /snapshots/{idOrName}, as the official SDK does.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	op := Name + ".deleteSnapshot"
	if snapshot == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, op, "", "empty snapshot name")
	}
	var ref SnapshotRef
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: snapshot, Method: http.MethodGet,
		Path: "/snapshots/" + url.PathEscape(snapshot)}, &ref)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if ref.ID == "" {
		return sandbox.Errorf(sandbox.Internal, op, snapshot, "Daytona answered snapshot %q without an id", snapshot)
	}
	_, err = p.c.Do(ctx, cloudhttp.Request{Op: op, ID: snapshot, Method: http.MethodDelete,
		Path: "/snapshots/" + url.PathEscape(ref.ID)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// SandboxName is the Daytona name for a sandbox key: the key itself when
// it fits Daytona's names (letters, digits, '-', '_', '.', at most 63),
// else a cleaned prefix and a digest of the key; a fresh name for "".
func SandboxName(key string) string {
	if key == "" {
		return "corral-" + randomHex(8)
	}
	ok := len(key) <= 63
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			ok = false
		}
	}
	if ok {
		return key
	}
	var b strings.Builder
	for _, r := range key {
		if b.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(key))
	return strings.Trim(b.String(), "-.") + "-" + hex.EncodeToString(sum[:6])
}

// labelValue keeps a key readable in a label (Daytona's labels are free
// text, bounded here to 255 bytes).
func labelValue(key string) string {
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
