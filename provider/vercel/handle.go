package vercel

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox, reached through its current session.
type handle struct {
	p    *Provider
	name string
	root string
	fs   sandbox.FS
	run  *execproc.Runner
	env  *execproc.Env // create env, then SetEnv overlays; never sent to the sandbox's configuration

	mu     sync.Mutex
	sid    string
	routes []Route
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(ans SandboxAndSession, env map[string]string) *handle {
	h := &handle{p: p, name: ans.Sandbox.Name, sid: ans.Session.ID, routes: ans.Routes, env: execproc.NewEnv(env)}
	root := p.opts.Workdir
	if root == "" {
		root = ans.Session.Cwd
	}
	if root == "" {
		root = "/vercel/sandbox"
	}
	h.root = root
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: h.name, Root: root,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	h.fs = execfs.New(h.fsRun, execfs.Options{Root: root, Provider: Name})
	return h
}

// b64Stdout runs "$@" with its stdout base64-encoded and keeps its exit
// status: the API carries output as JSON strings, which cannot hold
// bytes that are not UTF-8, and a file read must be byte-exact.
const b64Stdout = `exec 4>&1
s=$( { { "$@"; echo $? >&3; } | base64 >&4; } 3>&1 )
exit "$s"`

// fsRun is execfs's Runner: one command, its stdout base64 on the wire.
func (h *handle) fsRun(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	argv := append([]string{"sh", "-c", b64Stdout, "sh"}, cmd.Argv()...)
	res, err := h.run.Run(ctx, Name+".fs", argv, cmd.Stdin, "")
	if err != nil {
		return nil, err
	}
	out, derr := base64.StdEncoding.DecodeString(strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' {
			return -1
		}
		return r
	}, string(res.Stdout)))
	if derr != nil {
		return nil, sandbox.Errorf(sandbox.Internal, Name+".fs", h.name, "the sandbox's base64 output does not decode: %v", derr)
	}
	res.Stdout = out
	return res, nil
}

func (h *handle) session() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sid
}

// resume starts a new session when the one the handle knew has stopped
// (its timeout, a snapshot): the sandbox is persistent, its files stay.
func (h *handle) resume(ctx context.Context, op, stale string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.sid != stale {
		return nil // another call resumed already
	}
	ans, err := h.p.get(ctx, op, h.name, true)
	if err != nil {
		return err
	}
	h.sid, h.routes = ans.Session.ID, ans.Routes
	return nil
}

// stopped reports an answer that says the session has stopped (410
// sandbox_stopped, 422 sandbox_stopping or sandbox_snapshotting): the SDK
// resumes and retries on these.
func stopped(err error) bool {
	switch cloudhttp.StatusOf(err) {
	case http.StatusGone:
		return true
	case http.StatusUnprocessableEntity:
		return strings.Contains(err.Error(), "stopping") || strings.Contains(err.Error(), "snapshotting")
	}
	return false
}

// sessionReq builds a call under the current session: path is what
// follows /v2/sandboxes/sessions/{id}.
func (h *handle) sessionReq(op, sid, method, path string) cloudhttp.Request {
	return cloudhttp.Request{Op: op, ID: h.name, Method: method, Path: "/v2/sandboxes/sessions/" + url.PathEscape(sid) + path,
		Query: h.p.query(nil)}
}

// do makes a session call, resuming the sandbox once when its session has
// stopped.
func (h *handle) do(ctx context.Context, op, method, path string, edit func(*cloudhttp.Request), out any) (*cloudhttp.Response, error) {
	for try := 0; ; try++ {
		sid := h.session()
		req := h.sessionReq(op, sid, method, path)
		if edit != nil {
			edit(&req)
		}
		resp, err := h.p.c.Do(ctx, req, out)
		if err != nil && try == 0 && stopped(err) {
			if rerr := h.resume(ctx, op, sid); rerr != nil {
				return nil, rerr
			}
			continue
		}
		return resp, err
	}
}

// mkdirRoot makes the workspace directory, an existing one being fine
// (the API's mkdir is not recursive and answers 400 "File exists", and
// /vercel/sandbox always exists).
func (h *handle) mkdirRoot(ctx context.Context, op string) error {
	_, err := h.do(ctx, op, http.MethodPost, "/fs/mkdir", func(r *cloudhttp.Request) {
		r.JSON = map[string]string{"path": h.root}
		r.Idempotent = true
	}, nil)
	if err != nil && cloudhttp.StatusOf(err) == http.StatusBadRequest && strings.Contains(strings.ToLower(err.Error()), "exists") {
		return nil
	}
	return err
}

// ID returns the sandbox's name.
func (h *handle) ID() string { return h.name }

// Provider returns "vercel".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the sandbox.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the file system (exec-backed: the path guard runs in the
// sandbox).
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run.Exec(ctx, cmd)
}

// Spawn starts cmd.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return h.run.Spawn(ctx, cmd)
}

// ConnectPort returns the route Vercel gives the port; a port the sandbox
// does not expose yet is added to its ports (PATCH; at most 4).
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	h.mu.Lock()
	routes := append([]Route(nil), h.routes...)
	h.mu.Unlock()
	for _, r := range routes {
		if r.Port == port {
			return sandbox.Endpoint{URL: r.URL}, nil
		}
	}
	ports := []int{port}
	for _, r := range routes {
		ports = append(ports, r.Port)
	}
	var ans struct {
		Routes []Route `json:"routes"`
	}
	if _, err := h.p.call(ctx, cloudhttp.Request{Op: Name + ".port", ID: h.name, Method: http.MethodPatch,
		Path: "/v2/sandboxes/" + url.PathEscape(h.name), Query: url.Values{"projectId": {h.p.opts.ProjectID}},
		JSON: map[string]any{"ports": ports}}, &ans); err != nil {
		return sandbox.Endpoint{}, err
	}
	h.mu.Lock()
	h.routes = ans.Routes
	h.mu.Unlock()
	for _, r := range ans.Routes {
		if r.Port == port {
			return sandbox.Endpoint{URL: r.URL}, nil
		}
	}
	return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Unavailable, Name+".port", h.name, "vercel gave no route for port %d", port)
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot takes a Vercel snapshot of the sandbox. Vercel stops the
// session to take it; the next call resumes a new one.
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	var ans SnapshotAnswer
	if _, err := h.do(ctx, Name+".snapshot", http.MethodPost, "/snapshot", nil, &ans); err != nil {
		return sandbox.Snapshot{}, err
	}
	if ans.Snapshot.Status == "failed" || ans.Snapshot.ID == "" {
		return sandbox.Snapshot{}, sandbox.Errorf(sandbox.Internal, Name+".snapshot", h.name, "vercel snapshot failed (status %q)", ans.Snapshot.Status)
	}
	return sandbox.Snapshot{ID: ans.Snapshot.ID, Label: label, SandboxID: h.name, CreatedAt: time.Now().UTC()}, nil
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy deletes the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.name) }
