package upstashbox

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
const Name = "upstashbox"

// DefaultBaseURL is Upstash Box's API.
const DefaultBaseURL = "https://us-east-1.box.upstash.com"

// Workspace is the box's workspace directory (the SDK's Box.WORKSPACE).
const Workspace = "/workspace/home"

// LabelManaged marks corral's boxes (Box labels are plain strings).
const LabelManaged = "corral"

// Options configure the provider.
type Options struct {
	// APIKey is the Upstash Box API key (UPSTASH_BOX_API_KEY). Required.
	APIKey string
	// BaseURL is the API's root; default UPSTASH_BOX_BASE_URL, else
	// DefaultBaseURL.
	BaseURL string
	// Runtime is the box runtime (node, python, golang, ruby, rust);
	// "" is Box's default (node).
	Runtime string
	// Size is small, medium or large; "" is Box's default (small).
	Size string
	// KeepAlive makes keep-alive boxes (they cannot be paused).
	KeepAlive bool
	// Workdir is the workspace root in the box; default Workspace.
	Workdir string
	// DiscoverWorkdir learns the workspace root from the box (the working
	// directory of an exec without folder) instead of Workdir: for a
	// backend whose workspace is elsewhere (the fake's boxes are host
	// directories).
	DiscoverWorkdir bool
	// PreviewAuth is how ConnectPort protects a port: "bearer" (default),
	// "basic" or "none".
	PreviewAuth string
	// PortURL, when set, replaces the preview URL Box answers (tests point
	// it at the fake's proxy: the real host names do not resolve on
	// loopback).
	PortURL func(boxID string, port int) string
	// HTTPClient is the transport.
	HTTPClient *http.Client
	// Timeout bounds one REST call, retries included. Default 60s.
	Timeout time.Duration
	// StartTimeout bounds waiting for a box to be ready. Default 5m.
	StartTimeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines.
	Logger *slog.Logger
}

// Provider is the Upstash Box provider.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing key is an error naming
// UPSTASH_BOX_API_KEY.
func New(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Upstash Box needs UPSTASH_BOX_API_KEY (an API key from console.upstash.com)")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = os.Getenv("UPSTASH_BOX_BASE_URL")
	}
	if opts.BaseURL == "" {
		opts.BaseURL = DefaultBaseURL
	}
	if opts.Workdir == "" {
		opts.Workdir = Workspace
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 5 * time.Minute
	}
	switch opts.PreviewAuth {
	case "":
		opts.PreviewAuth = "bearer"
	case "bearer", "basic", "none":
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "previewAuth is bearer, basic or none, not %q", opts.PreviewAuth)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	h.Set(HeaderAPIKey, opts.APIKey)
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: strings.TrimRight(opts.BaseURL, "/"), Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.Timeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log})
	if err != nil {
		return nil, err
	}
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		KillableProcesses: true, Snapshots: true, Fork: true, NetworkPolicy: true, DurableFilesystem: true}
	return &Provider{opts: opts, c: c, caps: caps, log: log}, nil
}

// Name returns "upstashbox".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's boxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Create makes a box named after opts.ID (the key), labelled as corral's,
// and waits until it is ready. A create whose outcome is unknown is
// reconciled by name. opts.Env stays in the handle: it is never sent as
// the box's env_vars, which Box keeps with the box.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	return p.create(ctx, opts, "")
}

func (p *Provider) create(ctx context.Context, opts sandbox.CreateOptions, snapshot string) (sandbox.Handle, error) {
	op := Name + ".create"
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	name := BoxName(opts.ID)
	labels := []string{LabelManaged}
	for k, v := range opts.Labels {
		labels = append(labels, k+"="+v)
	}
	req := CreateBox{SnapshotID: snapshot, Name: name, Labels: labels, Size: p.opts.Size, KeepAlive: p.opts.KeepAlive, Runtime: p.opts.Runtime}
	if opts.Network == sandbox.NetworkDeny {
		req.NetworkPolicy = &NetworkPolicy{Mode: "deny-all"}
	}
	path := "/v2/box"
	if snapshot != "" {
		path = "/v2/box/from-snapshot"
	}
	var b Box
	err := p.c.Create(ctx, cloudhttp.Request{Op: op, ID: name, Method: http.MethodPost, Path: path, JSON: req}, &b,
		func(ctx context.Context) (bool, error) {
			found, err := p.get(ctx, op, name)
			if sandbox.CodeOf(err) == sandbox.NotFound {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			b = *found
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	h, err := p.open(ctx, op, b, opts.Env)
	if err != nil {
		p.cleanup(ctx, b.ID)
		return nil, err
	}
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.fs, opts.SourceDir, Name); err != nil {
			p.cleanup(ctx, b.ID)
			return nil, sandbox.Wrap(sandbox.Internal, op, b.ID, err)
		}
	}
	return h, nil
}

func (p *Provider) cleanup(ctx context.Context, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = p.Destroy(dctx, id)
}

// get reads a box by id or name; a deleted or failed box is NotFound.
func (p *Provider) get(ctx context.Context, op, idOrName string) (*Box, error) {
	var b Box
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: idOrName, Method: http.MethodGet,
		Path: "/v2/box/" + url.PathEscape(idOrName)}, &b); err != nil {
		return nil, err
	}
	if gone(b.Status) {
		return nil, sandbox.Errorf(sandbox.NotFound, op, idOrName, "upstash box %s is %s", idOrName, b.Status)
	}
	return &b, nil
}

func gone(status string) bool { return status == StatusDeleted || status == StatusError }

// Resume reopens the box with id (or name); a paused box is resumed; a
// deleted one is NotFound. Its environment is empty until SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	op := Name + ".resume"
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty box id")
	}
	b, err := p.get(ctx, op, id)
	if err != nil {
		return nil, err
	}
	return p.open(ctx, op, *b, nil)
}

// open waits for b to be ready (resuming it when paused) and makes its
// handle.
func (p *Provider) open(ctx context.Context, op string, b Box, env map[string]string) (*handle, error) {
	deadline := time.Now().Add(p.opts.StartTimeout)
	resumed := false
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		switch {
		case b.Status == StatusIdle || b.Status == StatusRunning:
			return p.newHandle(ctx, op, b, env)
		case gone(b.Status):
			return nil, sandbox.Errorf(sandbox.NotFound, op, b.ID, "upstash box %s is %s", b.ID, b.Status)
		case b.Status == StatusPaused && !resumed:
			sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "start", Subject: b.ID, Where: Name, Status: "resuming the paused box"})
			if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: b.ID, Method: http.MethodPost,
				Path: "/v2/box/" + url.PathEscape(b.ID) + "/resume", Idempotent: true}, nil); err != nil {
				return nil, err
			}
			resumed = true
			if err := p.status(ctx, op, &b); err != nil {
				return nil, err
			}
			continue
		}
		if time.Now().After(deadline) {
			return nil, sandbox.Errorf(sandbox.DeadlineExceeded, op, b.ID, "upstash box %s still %q after %v", b.ID, b.Status, p.opts.StartTimeout)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, sandbox.Wrap(sandbox.Canceled, op, b.ID, ctx.Err())
		case <-t.C:
		}
		next, err := p.get(ctx, op, b.ID)
		if err != nil {
			return nil, err
		}
		b = *next
	}
}

// status refreshes b.Status with GET /v2/box/{id}/status.
func (p *Provider) status(ctx context.Context, op string, b *Box) error {
	var st StatusAnswer
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: b.ID, Method: http.MethodGet,
		Path: "/v2/box/" + url.PathEscape(b.ID) + "/status"}, &st); err != nil {
		return err
	}
	b.Status = st.Status
	return nil
}

// Destroy deletes the box; one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete,
		Path: "/v2/box/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// RestoreSnapshot creates a box from a snapshot (POST
// /v2/box/from-snapshot); snapshots outlive their box.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if _, sid, ok := strings.Cut(snapshot, "/"); !ok || sid == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".restore", snapshot, "a snapshot id is <box id>/<snapshot id>")
	}
	_, sid, _ := strings.Cut(snapshot, "/")
	return p.create(ctx, opts, sid)
}

// DeleteSnapshot deletes a snapshot; one that is gone is fine.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	boxID, sid, ok := strings.Cut(snapshot, "/")
	if !ok || sid == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, Name+".deleteSnapshot", snapshot, "a snapshot id is <box id>/<snapshot id>")
	}
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".deleteSnapshot", ID: snapshot, Method: http.MethodDelete,
		Path: "/v2/box/" + url.PathEscape(boxID) + "/snapshots/" + url.PathEscape(sid)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// BoxName is the box name for a sandbox key: the key itself when it fits
// (letters, digits, '-', '_', at most 63), else a cleaned prefix and a
// digest of the key; a fresh name for "".
func BoxName(key string) string {
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

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
