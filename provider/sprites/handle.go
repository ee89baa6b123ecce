package sprites

import (
	"context"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one Sprite.
type handle struct {
	p    *Provider
	sp   Sprite
	root string
	base map[string]string // the Sprite's default environment, read at open
	env  *execproc.Env     // create env, then SetEnv overlays; never sent at create
	fs   sandbox.FS
	run  *execproc.Runner
}

var _ sandbox.Handle = (*handle)(nil)

// openScript makes the workspace ($1, default $HOME/workspace), prints
// its path, then the default environment (what env= must keep).
const openScript = `r=${1:-$HOME/workspace}; mkdir -p -- "$r" && printf '%s\n' "$r" && env`

// open reads the default environment and makes the workspace (one exec,
// from /), then builds the handle's layers.
func (p *Provider) open(ctx context.Context, op string, sp Sprite, env map[string]string) (*handle, error) {
	h := &handle{p: p, sp: sp, env: execproc.NewEnv(env), root: "/"}
	h.build()
	res, err := h.run.Run(ctx, op, []string{"sh", "-c", openScript, "sh", p.opts.Workdir}, nil, "")
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, sp.Name, "sprites: making the workspace exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	root, rest, _ := strings.Cut(string(res.Stdout), "\n")
	if !strings.HasPrefix(root, "/") {
		return nil, sandbox.Errorf(sandbox.Internal, op, sp.Name, "sprites: the workspace path %q is not absolute", root)
	}
	h.root, h.base = root, parseEnv(rest)
	h.build()
	return h, nil
}

// parseEnv reads env(1) output: a line starting NAME= begins a variable,
// any other line continues the value before it. The shell's own
// variables are left out.
func parseEnv(out string) map[string]string {
	m := map[string]string{}
	last := ""
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && sandbox.ValidateEnvName(k) == nil {
			m[k], last = v, k
			continue
		}
		if last != "" {
			m[last] += "\n" + line
		}
	}
	for _, k := range []string{"PWD", "OLDPWD", "SHLVL", "_"} {
		delete(m, k)
	}
	return m
}

// build makes the process and file layers for the current root.
func (h *handle) build() {
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: h.sp.Name, Root: h.root,
		Env: h.env.Copy, KillGrace: h.p.opts.KillGrace, Kill: h.kill, Logger: h.p.log})
	h.fs = execfs.New(func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
		return h.run.Run(ctx, Name+".fs", cmd.Argv(), cmd.Stdin, "")
	}, execfs.Options{Root: h.root, Provider: Name})
}

// ID returns the Sprite's name (Sprites address Sprites by name).
func (h *handle) ID() string { return h.sp.Name }

// Provider returns "sprites".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the Sprite.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the file system (exec-backed: one exec WebSocket per
// operation, binary-safe frames).
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run.Exec(ctx, cmd)
}

// Spawn starts cmd.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return h.run.Spawn(ctx, cmd)
}

// ConnectPort returns the Sprite's URL, which reaches its one HTTP port
// (Options.HTTPPort). With URLAuth "sprite" the URL needs the Bearer
// token: it is in Headers (and Token). Another port is FailedPrecondition.
func (h *handle) ConnectPort(_ context.Context, port int) (sandbox.Endpoint, error) {
	if port != h.p.opts.HTTPPort {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.FailedPrecondition, Name+".port", h.sp.Name,
			"a Sprite's URL reaches one port, %d (httpPort), not %d", h.p.opts.HTTPPort, port)
	}
	if h.sp.URL == "" {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Unavailable, Name+".port", h.sp.Name, "sprites returned no URL for %s", h.sp.Name)
	}
	ep := sandbox.Endpoint{URL: h.sp.URL}
	if h.sp.URLSettings.Auth != "public" {
		ep.Token = h.p.opts.APIKey
		ep.Headers = map[string]string{"Authorization": "Bearer " + h.p.opts.APIKey}
	}
	return ep, nil
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot is unsupported in the contract's sense (see
// Provider.RestoreSnapshot); Checkpoint takes an in-place checkpoint.
func (h *handle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, &sandbox.UnsupportedCapabilityError{Provider: Name, Capability: "snapshots", Hint: noRestore}
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy deletes the Sprite.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.sp.Name) }
