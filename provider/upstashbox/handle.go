package upstashbox

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one box.
type handle struct {
	p    *Provider
	b    Box
	root string
	fs   sandbox.FS
	run  *execproc.Runner
	env  *execproc.Env // create env, then SetEnv overlays; never sent as env_vars
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(ctx context.Context, op string, b Box, env map[string]string) (*handle, error) {
	h := &handle{p: p, b: b, root: p.opts.Workdir, env: execproc.NewEnv(env)}
	if p.opts.DiscoverWorkdir {
		res, err := h.httpExec(ctx, op, []string{"pwd"})
		if err != nil {
			return nil, err
		}
		if wd := strings.TrimSpace(res.Output); res.ExitCode == 0 && strings.HasPrefix(wd, "/") {
			h.root = wd
		}
	}
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: b.ID, Root: h.root,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	h.fs = execfs.New(func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
		return h.run.Run(ctx, Name+".fs", cmd.Argv(), cmd.Stdin, "")
	}, execfs.Options{Root: h.root, Provider: Name})
	return h, nil
}

// ID returns the box id.
func (h *handle) ID() string { return h.b.ID }

// Provider returns "upstashbox".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the box.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the file system (exec-backed, over exec sessions).
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion over an exec session.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run.Exec(ctx, cmd)
}

// Spawn starts cmd detached (see spawn.go).
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return h.run.Spawn(ctx, cmd)
}

// ConnectPort returns the port's public URL (POST /v2/box/{id}/preview)
// with its bearer token or basic-auth credentials as the Authorization
// header, as Options.PreviewAuth says.
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	req := PreviewRequest{Port: port, BearerToken: h.p.opts.PreviewAuth == "bearer", BasicAuth: h.p.opts.PreviewAuth == "basic"}
	var pv Preview
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".port", ID: h.b.ID, Method: http.MethodPost,
		Path: "/v2/box/" + url.PathEscape(h.b.ID) + "/preview", JSON: req, Idempotent: true}, &pv); err != nil {
		return sandbox.Endpoint{}, err
	}
	ep := sandbox.Endpoint{URL: pv.URL}
	if h.p.opts.PortURL != nil {
		ep.URL = h.p.opts.PortURL(h.b.ID, port)
	}
	switch {
	case pv.Token != "":
		ep.Token = pv.Token
		ep.Headers = map[string]string{"Authorization": "Bearer " + pv.Token}
	case pv.Username != "":
		ep.Headers = map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(pv.Username+":"+pv.Password))}
	}
	return ep, nil
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot saves the workspace (POST /v2/box/{id}/snapshots, then
// polling the list until it is ready). Its id is "<box id>/<snapshot id>"
// (deleting a snapshot names its box).
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	op := Name + ".snapshot"
	name := label
	if name == "" {
		name = "corral-" + randomHex(4)
	}
	var sn Snapshot
	base := "/v2/box/" + url.PathEscape(h.b.ID) + "/snapshots"
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.b.ID, Method: http.MethodPost, Path: base,
		JSON: map[string]string{"name": name}}, &sn); err != nil {
		return sandbox.Snapshot{}, err
	}
	deadline := time.Now().Add(h.p.opts.StartTimeout)
	for wait := 100 * time.Millisecond; sn.Status == "creating"; wait = min(2*wait, 2*time.Second) {
		if time.Now().After(deadline) {
			return sandbox.Snapshot{}, sandbox.Errorf(sandbox.DeadlineExceeded, op, h.b.ID, "snapshot %s still creating", sn.ID)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return sandbox.Snapshot{}, sandbox.Wrap(sandbox.Canceled, op, h.b.ID, ctx.Err())
		case <-t.C:
		}
		var list SnapshotList
		if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.b.ID, Method: http.MethodGet, Path: base}, &list); err != nil {
			return sandbox.Snapshot{}, err
		}
		for _, s := range list.Snapshots {
			if s.ID == sn.ID {
				sn = s
			}
		}
	}
	if sn.Status != "ready" {
		return sandbox.Snapshot{}, sandbox.Errorf(sandbox.Internal, op, h.b.ID, "snapshot %s is %s", sn.ID, sn.Status)
	}
	return sandbox.Snapshot{ID: h.b.ID + "/" + sn.ID, Label: label, SandboxID: h.b.ID, CreatedAt: time.Unix(sn.CreatedAt, 0).UTC()}, nil
}

// Fork is snapshot → create from it → delete the scratch snapshot. The
// fork gets this handle's environment.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	sn, err := h.Snapshot(ctx, "corral-fork-"+randomHex(4))
	if err != nil {
		return nil, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if err := h.p.DeleteSnapshot(dctx, sn.ID); err != nil {
			h.p.log.Warn("upstashbox: deleting a fork's scratch snapshot failed", "snapshot", sn.ID, "err", err)
		}
	}()
	return h.p.RestoreSnapshot(ctx, sn.ID, sandbox.CreateOptions{Env: h.env.Copy()})
}

// Destroy deletes the box.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.b.ID) }
