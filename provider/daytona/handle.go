package daytona

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox.
type handle struct {
	p    *Provider
	sb   Sandbox
	tb   *cloudhttp.Client // the toolbox: toolboxProxyUrl + "/" + id
	root string
	fs   sandbox.FS
	run  *execproc.Runner
	env  *execproc.Env // create env, then SetEnv overlays; never sent to Daytona's configuration
	// links is false while no symbolic link can stand in the workspace: a
	// sandbox this handle made from Daytona's default snapshot, in which
	// the handle has started no command yet. The file system skips the
	// exec-backed link guard while it is false.
	links atomic.Bool
	pool  sessions
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(sb Sandbox, env map[string]string) *handle {
	base := strings.TrimRight(sb.ToolboxProxyURL, "/")
	if base == "" {
		base = "https://proxy.app.daytona.io/toolbox"
	}
	tb, _ := cloudhttp.New(cloudhttp.Options{Provider: Name, BaseURL: base + "/" + url.PathEscape(sb.ID), Header: p.hdr,
		HTTPClient: p.opts.HTTPClient, Timeout: p.opts.Timeout, Sleep: p.opts.Sleep, Jitter: p.opts.Jitter, Log: p.log})
	return &handle{p: p, sb: sb, tb: tb, env: execproc.NewEnv(env)}
}

// setRoot sets the workspace root and builds the process and file layers.
func (h *handle) setRoot(root string) {
	h.root = root
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: h.sb.ID, Root: root,
		Env: h.env.Copy, Kill: h.kill, KillGrace: h.p.opts.KillGrace, Logger: h.p.log})
	h.fs = fsys{h: h, FS: execfs.New(func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
		return h.run.Run(ctx, Name+".fs", cmd.Argv(), cmd.Stdin, "")
	}, execfs.Options{Root: root, Provider: Name})}
}

// ID returns Daytona's sandbox id.
func (h *handle) ID() string { return h.sb.ID }

// Provider returns "daytona".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the sandbox.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the file system (exec-backed, through session commands).
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	h.links.Store(true)
	return h.run.Exec(ctx, cmd)
}

// Spawn starts cmd.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	h.links.Store(true)
	return h.run.Spawn(ctx, cmd)
}

// ConnectPort returns Daytona's preview URL for port, with the preview
// token as the x-daytona-preview-token header (and Token).
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	var pv PortPreviewURL
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".port", ID: h.sb.ID, Method: http.MethodGet,
		Path: "/sandbox/" + url.PathEscape(h.sb.ID) + "/ports/" + strconv.Itoa(port) + "/preview-url"}, &pv); err != nil {
		return sandbox.Endpoint{}, err
	}
	ep := sandbox.Endpoint{URL: pv.URL, Token: pv.Token}
	if pv.Token != "" {
		ep.Headers = map[string]string{"x-daytona-preview-token": pv.Token}
	}
	return ep, nil
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot captures the sandbox as a Daytona snapshot named
// corral-<id12>-<label> (POST /sandbox/{id}/snapshot, then polling until
// the sandbox leaves "snapshotting").
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	op := Name + ".snapshot"
	id12 := h.sb.ID
	if len(id12) > 12 {
		id12 = id12[:12]
	}
	tag := label
	if tag == "" {
		tag = "snap"
	}
	name := SandboxName(fmt.Sprintf("corral-%s-%s-%s", id12, tag, randomHex(3)))
	var sb Sandbox
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost,
		Path: "/sandbox/" + url.PathEscape(h.sb.ID) + "/snapshot", JSON: map[string]string{"name": name}}, &sb); err != nil {
		return sandbox.Snapshot{}, err
	}
	deadline := time.Now().Add(h.p.opts.StartTimeout)
	for sb.State == "snapshotting" {
		if time.Now().After(deadline) {
			return sandbox.Snapshot{}, sandbox.Errorf(sandbox.DeadlineExceeded, op, h.sb.ID, "snapshot %s still in progress", name)
		}
		t := time.NewTimer(500 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return sandbox.Snapshot{}, sandbox.Wrap(sandbox.Canceled, op, h.sb.ID, ctx.Err())
		case <-t.C:
		}
		next, err := h.p.get(ctx, op, h.sb.ID)
		if err != nil {
			return sandbox.Snapshot{}, err
		}
		sb = *next
	}
	if sb.State == "error" || sb.State == "build_failed" {
		return sandbox.Snapshot{}, sandbox.Errorf(sandbox.Internal, op, h.sb.ID, "snapshot %s failed: %s", name, sb.ErrorReason)
	}
	return sandbox.Snapshot{ID: name, Label: label, SandboxID: h.sb.ID, CreatedAt: time.Now().UTC()}, nil
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy deletes the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.sb.ID) }
