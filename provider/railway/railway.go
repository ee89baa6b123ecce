package railway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "railway"

// DefaultEndpoint is backboard's GraphQL endpoint, the SDK's default.
const DefaultEndpoint = "https://backboard.railway.com/graphql/v2"

// Variables corral sets on its sandboxes: the marker and the sandbox key
// (Railway ids are opaque and sandboxes have no name or metadata, so the
// key rides in the create-time variables; never a secret).
const (
	VarManaged = "CORRAL"
	VarKey     = "CORRAL_SANDBOX_KEY"
)

// denyRefusal is why a network deny is refused.
const denyRefusal = "railway cannot deny the network: both isolation modes (ISOLATED, PRIVATE) keep public egress; use a provider with networkPolicy"

// CheckpointPrefix starts the names of corral's checkpoints (Prune
// deletes only these).
const CheckpointPrefix = "corral-"

// Options configure the provider.
type Options struct {
	// Token is a Railway token: an account or workspace token
	// (RAILWAY_API_TOKEN, sent as Authorization: Bearer) or a project
	// token (RAILWAY_TOKEN, sent as Project-Access-Token). Required.
	Token string
	// ProjectToken says Token is a project token.
	ProjectToken bool
	// EnvironmentID is where sandboxes live (RAILWAY_ENVIRONMENT_ID).
	// Required.
	EnvironmentID string
	// Endpoint is the GraphQL endpoint; default DefaultEndpoint.
	Endpoint string
	// ExecEndpoint is the tcp-proxy exec WebSocket; default derived from
	// Endpoint as the SDK does (wss://ssh.<host>:2226/ws/exec). The files
	// socket is the same origin's /ws/files.
	ExecEndpoint string
	// Region places new sandboxes ("" is Railway's default).
	Region string
	// IdleTimeoutMinutes is how long a sandbox may sit idle before Railway
	// destroys it; nil is the plan's default (30), 0 disables.
	IdleTimeoutMinutes *int
	// Private joins the environment's private network (networkIsolation
	// PRIVATE); default ISOLATED. Both keep public egress.
	Private bool
	// Workdir is the workspace root; default /workspace. A leading "~/"
	// is the sandbox's $HOME.
	Workdir string
	// Heartbeat is how often a handle touches the sandbox while one of its
	// spawned processes is live, so the idle clock does not destroy it
	// under a run; default a third of the idle timeout (10 minutes), off
	// when the idle timeout is 0.
	Heartbeat time.Duration
	// HTTPClient is the transport.
	HTTPClient *http.Client
	// CallTimeout bounds one GraphQL call, retries included. Default 60s.
	CallTimeout time.Duration
	// KillGrace is the pause between SIGTERM and SIGKILL. Default 2s.
	KillGrace time.Duration
	// Sleep and Jitter are cloudhttp's (tests inject them).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
	// Logger receives debug lines.
	Logger *slog.Logger
}

// Provider is the Railway provider.
type Provider struct {
	opts    Options
	c       *cloudhttp.Client // backboard
	ws      *cloudhttp.Client // tcp-proxy (no headers: the shell token rides in the subprotocol)
	gqlPath string
	execWS  string // path of the exec socket
	filesWS string
	caps    sandbox.Capabilities
	log     *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a provider for opts. A missing token or environment is an
// error naming its variable.
func New(opts Options) (*Provider, error) {
	if opts.Token == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
			"Railway needs a token: set RAILWAY_API_TOKEN (an account or workspace token) or RAILWAY_TOKEN (a project token)")
	}
	if opts.EnvironmentID == "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, Name+".config", "",
			"Railway needs RAILWAY_ENVIRONMENT_ID: the environment the sandboxes live in")
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	eu, err := url.Parse(opts.Endpoint)
	if err != nil || eu.Host == "" || !(eu.Scheme == "https" || eu.Scheme == "http" && loopback(eu.Hostname())) {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "endpoint %q: want an https URL (http only on loopback)", opts.Endpoint)
	}
	if opts.ExecEndpoint == "" {
		host := eu.Hostname()
		host = "ssh." + strings.TrimPrefix(host, "backboard.")
		opts.ExecEndpoint = "wss://" + host + ":2226/ws/exec"
	}
	wu, err := url.Parse(opts.ExecEndpoint)
	if err != nil || wu.Host == "" || !(wu.Scheme == "wss" || wu.Scheme == "ws" && loopback(wu.Hostname())) {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".config", "", "exec endpoint %q: want a wss URL (ws only on loopback)", opts.ExecEndpoint)
	}
	if opts.Workdir == "" {
		opts.Workdir = "/workspace"
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 60 * time.Second
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	idle := 30
	if opts.IdleTimeoutMinutes != nil {
		idle = *opts.IdleTimeoutMinutes
	}
	if opts.Heartbeat <= 0 && idle > 0 {
		opts.Heartbeat = time.Duration(idle) * time.Minute / 3
	}
	if idle == 0 {
		opts.Heartbeat = 0
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := http.Header{}
	if opts.ProjectToken {
		h.Set("Project-Access-Token", opts.Token)
	} else {
		h.Set("Authorization", "Bearer "+opts.Token)
	}
	h.Set("User-Agent", "corral-provider-railway/1")
	message := func(body []byte) string {
		var m struct {
			Errors []struct {
				Message string `json:"message"`
			} `json:"errors"`
		}
		if json.Unmarshal(body, &m) == nil && len(m.Errors) > 0 && m.Errors[0].Message != "" {
			return m.Errors[0].Message
		}
		return cloudhttp.DefaultMessage(body)
	}
	c, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: eu.Scheme + "://" + eu.Host, Header: h,
		HTTPClient: opts.HTTPClient, Timeout: opts.CallTimeout, Sleep: opts.Sleep, Jitter: opts.Jitter, Log: log, Message: message})
	if err != nil {
		return nil, err
	}
	scheme := "https"
	if wu.Scheme == "ws" {
		scheme = "http"
	}
	ws, err := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: scheme + "://" + wu.Host, HTTPClient: opts.HTTPClient,
		Timeout: opts.CallTimeout, Log: log})
	if err != nil {
		return nil, err
	}
	filesPath := strings.TrimSuffix(wu.Path, "/ws/exec") + "/ws/files"
	caps := sandbox.Capabilities{FS: true, Exec: true, Env: true, BackgroundProcesses: true,
		KillableProcesses: true, Snapshots: true, Fork: true}
	return &Provider{opts: opts, c: c, ws: ws, gqlPath: eu.Path, execWS: wu.Path, filesWS: filesPath, caps: caps, log: log}, nil
}

func loopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// Name returns "railway".
func (p *Provider) Name() string { return Name }

// Capabilities returns what the provider's sandboxes can do: no network
// policy (both isolation modes keep public egress), no durable file system
// (an idle sandbox is destroyed), no writable stdin for spawned processes
// (the exec socket's stdin frame is not part of the SDK's protocol), no
// ports.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

func (p *Provider) env() string { return p.opts.EnvironmentID }

// Create makes a sandbox carrying the key and the marker in its
// variables, and makes the workspace directory. Network deny is refused:
// Railway sandboxes keep public egress. opts.Env stays in the handle and
// is applied per command, never sent as create-time variables.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	return p.create(ctx, Name+".create", opts, CreateInput{})
}

func (p *Provider) create(ctx context.Context, op string, opts sandbox.CreateOptions, in CreateInput) (sandbox.Handle, error) {
	if opts.Network == sandbox.NetworkDeny {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, opts.ID, "%s", denyRefusal)
	}
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	in.EnvironmentID = p.env()
	in.IdleTimeoutMinutes = p.opts.IdleTimeoutMinutes
	in.NetworkIsolation = "ISOLATED"
	if p.opts.Private {
		in.NetworkIsolation = "PRIVATE"
	}
	if in.SourceSandboxID == "" && in.Template == nil {
		in.Region = p.opts.Region
	}
	in.Variables = map[string]string{VarManaged: "1"}
	if opts.ID != "" {
		in.Variables[VarKey] = opts.ID
	}
	var ans struct {
		SandboxCreate SandboxInfo `json:"sandboxCreate"`
	}
	// Not retried: Railway mints the id, so a create whose answer was lost
	// cannot be looked up by name (the SDK does not retry either).
	if err := p.gql(ctx, op, opts.ID, mCreate, map[string]any{"input": in}, false, &ans); err != nil {
		return nil, err
	}
	info := ans.SandboxCreate
	if info.Status != "RUNNING" {
		var err error
		if info, err = p.waitRunning(ctx, op, info); err != nil {
			p.cleanup(ctx, info.ID)
			return nil, err
		}
	}
	h, err := p.open(ctx, op, info, opts.Env)
	if err == nil {
		err = h.mkdirRoot(ctx, op)
	}
	if err == nil && opts.SourceDir != "" {
		if uerr := sandbox.UploadDir(ctx, h.fs, opts.SourceDir, Name); uerr != nil {
			err = sandbox.Wrap(sandbox.Internal, op, info.ID, uerr)
		}
	}
	if err != nil {
		p.cleanup(ctx, info.ID)
		return nil, err
	}
	return h, nil
}

// waitRunning polls a sandbox that is not RUNNING yet (CREATING), as the
// SDK does (500 ms doubling to 5 s), up to the call's context.
func (p *Provider) waitRunning(ctx context.Context, op string, info SandboxInfo) (SandboxInfo, error) {
	delay := 500 * time.Millisecond
	for {
		if gone(info.Status) {
			return info, sandbox.Errorf(sandbox.NotFound, op, info.ID, "railway sandbox %s is %s", info.ID, info.Status)
		}
		if info.Status == "RUNNING" {
			return info, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return info, sandbox.Wrap(sandbox.DeadlineExceeded, op, info.ID, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
		got, err := p.get(ctx, op, info.ID)
		if err != nil {
			return info, err
		}
		info = *got
	}
}

func (p *Provider) cleanup(ctx context.Context, id string) {
	if id == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	_ = p.Destroy(dctx, id)
}

// get reads a sandbox; a missing (null) or gone one is NotFound.
func (p *Provider) get(ctx context.Context, op, id string) (*SandboxInfo, error) {
	var ans struct {
		Sandbox *SandboxInfo `json:"sandbox"`
	}
	if err := p.gql(ctx, op, id, qSandbox, map[string]any{"environmentId": p.env(), "id": id}, true, &ans); err != nil {
		return nil, err
	}
	if ans.Sandbox == nil {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "railway sandbox %s not found in environment %s (an idle sandbox is destroyed)", id, p.env())
	}
	if gone(ans.Sandbox.Status) {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "railway sandbox %s is %s", id, ans.Sandbox.Status)
	}
	return ans.Sandbox, nil
}

// Resume reopens sandbox id (waiting while it is CREATING); one that is
// gone (destroyed, idle, failed) is NotFound: Railway's file system is
// not durable, so corral re-bootstraps. Its environment is empty until
// SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	op := Name + ".resume"
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox id")
	}
	info, err := p.get(ctx, op, id)
	if err != nil {
		return nil, err
	}
	if info.Status != "RUNNING" {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		got, err := p.waitRunning(wctx, op, *info)
		cancel()
		if err != nil {
			return nil, err
		}
		info = &got
	}
	return p.open(ctx, op, *info, nil)
}

// Destroy destroys the sandbox; one that is gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	err := p.gql(ctx, Name+".destroy", id, mDestroy, map[string]any{"id": id, "environmentId": p.env()}, true, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

// RestoreSnapshot boots a new sandbox from a checkpoint (by name, as
// Railway boots them); the checkpoint outlives its source.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if snapshot == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, Name+".restore", "", "empty snapshot id")
	}
	h, err := p.create(ctx, Name+".restore", opts, CreateInput{Template: &TemplateInput{Name: snapshot}})
	if err != nil && sandbox.CodeOf(err) == sandbox.NotFound {
		return nil, sandbox.Errorf(sandbox.NotFound, Name+".restore", snapshot, "railway checkpoint %s not found", snapshot)
	}
	return h, err
}

// DeleteSnapshot deletes the checkpoint named snapshot; one that is gone
// is fine.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	cps, err := p.checkpoints(ctx)
	if err != nil {
		return err
	}
	for _, c := range cps {
		if c.Key == snapshot {
			return p.deleteCheckpoint(ctx, c)
		}
	}
	return nil
}

// deleteCheckpoint deletes c by its id; one that is gone is fine.
func (p *Provider) deleteCheckpoint(ctx context.Context, c CheckpointInfo) error {
	err := p.gql(ctx, Name+".deleteSnapshot", c.Key, mCheckpointDelete, map[string]any{"environmentId": p.env(), "id": c.ID}, true, nil)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return nil
	}
	return err
}

func (p *Provider) checkpoints(ctx context.Context) ([]CheckpointInfo, error) {
	var ans struct {
		SandboxCheckpoints []CheckpointInfo `json:"sandboxCheckpoints"`
	}
	err := p.gql(ctx, Name+".checkpoints", p.env(), qCheckpoints, map[string]any{"environmentId": p.env()}, true, &ans)
	return ans.SandboxCheckpoints, err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
