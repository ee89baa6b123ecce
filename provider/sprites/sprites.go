package sprites

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
const Name = "sprites"

// DefaultAPIURL is the Sprites API.
const DefaultAPIURL = "https://api.sprites.dev"

// Label marks corral's Sprites (Sprites' labels are plain strings).
const Label = "corral"

// Options configure the provider.
type Options struct {
	// APIKey is the Sprites token (SPRITES_API_KEY). Required.
	APIKey string
	// APIURL is the API's root; default SPRITES_API_URL, else
	// DefaultAPIURL.
	APIURL string
	// Workdir is the workspace in the Sprite; default "$HOME/workspace"
	// (/home/sprite/workspace on Sprites).
	Workdir string
	// URLAuth is the Sprite URL's auth: "sprite" (the default: the URL
	// needs the Bearer token, which ConnectPort returns as a header) or
	// "public".
	URLAuth string
	// HTTPPort is the one port the Sprite's URL reaches. Default 8080.
	HTTPPort int
	// WaitForCapacity asks create to wait for capacity instead of failing.
	WaitForCapacity bool
	// HTTPClient is the transport.
	HTTPClient *http.Client
	// Timeout bounds one REST call, retries included. Default 60s.
	Timeout time.Duration
	// KillGrace is the kill endpoint's timeout between the signal and
	// SIGKILL. Default 2s.
	KillGrace time.Duration
	// RestoreTimeout bounds waiting for reads to work after a checkpoint
	// restore. Default 10m.
	RestoreTimeout time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines.
	Logger *slog.Logger
}

// Provider is the Sprites provider.
type Provider struct {
	opts Options
	c    *cloudhttp.Client
	caps sandbox.Capabilities
	log  *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing key is an error naming
// SPRITES_API_KEY.
func New(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "", "Sprites needs SPRITES_API_KEY (a token from sprites.dev, or `sprite org auth`)")
	}
	if opts.APIURL == "" {
		opts.APIURL = os.Getenv("SPRITES_API_URL")
	}
	if opts.APIURL == "" {
		opts.APIURL = DefaultAPIURL
	}
	switch opts.URLAuth {
	case "":
		opts.URLAuth = "sprite"
	case "sprite", "public":
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "urlAuth must be sprite or public, not %q", opts.URLAuth)
	}
	if opts.HTTPPort <= 0 {
		opts.HTTPPort = 8080
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	if opts.RestoreTimeout <= 0 {
		opts.RestoreTimeout = 10 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+opts.APIKey)
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: strings.TrimRight(opts.APIURL, "/"), Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.Timeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log})
	if err != nil {
		return nil, err
	}
	// Snapshots is false: a checkpoint is restored in place only (the
	// contract's RestoreSnapshot makes a new sandbox); see Checkpoint.
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		WritableStdin: true, KillableProcesses: true, DurableFilesystem: true}
	return &Provider{opts: opts, c: c, caps: caps, log: log}, nil
}

// Name returns "sprites".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's Sprites can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Create makes a Sprite named after opts.ID (the key), labelled as
// corral's, then the workspace. A create whose outcome is unknown is
// reconciled by name. opts.Env is kept in the handle and never sent.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	name := SpriteName(opts.ID)
	labels := []string{Label}
	for k, v := range opts.Labels {
		labels = append(labels, labelString(k, v))
	}
	req := CreateSprite{Name: name, URLSettings: &URLSettings{Auth: p.opts.URLAuth}, Labels: labels, WaitForCapacity: p.opts.WaitForCapacity}
	var sp Sprite
	err := p.c.Create(ctx, cloudhttp.Request{Op: Name + ".create", ID: name, Method: http.MethodPost, Path: "/v1/sprites", JSON: req, Timeout: 2 * time.Minute}, &sp,
		func(ctx context.Context) (bool, error) {
			found, err := p.get(ctx, Name+".create", name)
			if sandbox.CodeOf(err) == sandbox.NotFound {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			sp = *found
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	h, err := p.open(ctx, Name+".create", sp, opts.Env)
	if err != nil {
		p.cleanup(ctx, sp.Name)
		return nil, err
	}
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.fs, opts.SourceDir, Name); err != nil {
			p.cleanup(ctx, sp.Name)
			return nil, sandbox.Wrap(sandbox.Internal, Name+".create", sp.Name, err)
		}
	}
	return h, nil
}

func (p *Provider) cleanup(ctx context.Context, name string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = p.Destroy(dctx, name)
}

// get reads a Sprite by name.
func (p *Provider) get(ctx context.Context, op, name string) (*Sprite, error) {
	var sp Sprite
	if _, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: name, Method: http.MethodGet, Path: "/v1/sprites/" + url.PathEscape(name)}, &sp); err != nil {
		return nil, err
	}
	if sp.Name == "" {
		sp.Name = name
	}
	return &sp, nil
}

// Resume reopens the Sprite named id (a cold Sprite wakes on the first
// command). A deleted one is NotFound. Its environment is empty until
// SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".resume", id, "empty sprite name")
	}
	sp, err := p.get(ctx, Name+".resume", id)
	if err != nil {
		return nil, err
	}
	return p.open(ctx, Name+".resume", *sp, nil)
}

// Destroy deletes the Sprite (its checkpoints with it); one that is gone
// is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	_, err := p.c.Do(ctx, cloudhttp.Request{Op: Name + ".destroy", ID: id, Method: http.MethodDelete, Path: "/v1/sprites/" + url.PathEscape(id)}, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// noRestore is the reason RestoreSnapshot and Snapshot give.
const noRestore = "a Sprite's checkpoints are restored in place and die with the Sprite, so no new sandbox can be made from one; " +
	"use the handle's Checkpoint and RestoreCheckpoint (the sprites.Checkpointer interface) to roll a Sprite back"

// RestoreSnapshot is unsupported: Sprites has no restore into a new
// sandbox.
func (p *Provider) RestoreSnapshot(context.Context, string, sandbox.CreateOptions) (sandbox.Handle, error) {
	return nil, &sandbox.UnsupportedCapabilityError{Provider: Name, Capability: "snapshots", Hint: noRestore}
}

// DeleteSnapshot is unsupported (see RestoreSnapshot).
func (p *Provider) DeleteSnapshot(context.Context, string) error {
	return &sandbox.UnsupportedCapabilityError{Provider: Name, Capability: "snapshots", Hint: noRestore}
}

// SpriteName is the Sprite name for a sandbox key: the key itself when it
// fits Sprites' names (lowercase letters, digits and '-', at most 63),
// else a cleaned prefix and a digest of the key; a fresh name for "".
func SpriteName(key string) string {
	if key == "" {
		return "corral-" + randomHex(6)
	}
	ok := len(key) <= 63 && key[0] != '-'
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			ok = false
		}
	}
	if ok {
		return key
	}
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if b.Len() >= 40 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	sum := sha256.Sum256([]byte(key))
	prefix := strings.Trim(b.String(), "-")
	if prefix == "" {
		prefix = "corral"
	}
	return prefix + "-" + hex.EncodeToString(sum[:6])
}

// labelString is a corral label as a Sprites label string.
func labelString(k, v string) string {
	s := k + "=" + v
	if len(s) > 128 {
		sum := sha256.Sum256([]byte(s))
		s = s[:100] + "-" + hex.EncodeToString(sum[:8])
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
