package blaxel

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox, reached through its own API (metadata.url).
type handle struct {
	p    *Provider
	name string
	root string
	sc   *cloudhttp.Client // the sandbox-api
	fs   sandbox.FS
	run  *execproc.Runner
	env  *execproc.Env // create env, then SetEnv overlays; never in the sandbox's configuration
}

var _ sandbox.Handle = (*handle)(nil)

// openScript makes the workspace ($1; "~/…" is under $HOME) and prints
// its absolute path.
const openScript = `r=$1; case $r in "~/"*) r=$HOME/${r#"~/"};; esac; mkdir -p -- "$r" && cd -- "$r" && pwd -P`

// open builds the handle for sb and makes the workspace (one command).
func (p *Provider) open(ctx context.Context, op string, sb *Sandbox, env map[string]string) (*handle, error) {
	name := sb.Metadata.Name
	if sb.Metadata.URL == "" {
		return nil, sandbox.Errorf(sandbox.Internal, op, name, "blaxel gave sandbox %s no url", name)
	}
	sc, err := p.client(sb.Metadata.URL)
	if err != nil {
		return nil, err
	}
	h := &handle{p: p, name: name, sc: sc, env: execproc.NewEnv(env)}
	var out bytes.Buffer
	code, err := h.raw(ctx, op, []string{"sh", "-c", openScript, "sh", p.opts.Workdir}, &out)
	if err != nil {
		return nil, err
	}
	root := strings.TrimSpace(out.String())
	if code != 0 || !strings.HasPrefix(root, "/") {
		return nil, sandbox.Errorf(sandbox.Internal, op, name, "making the workspace %s failed (exit %d): %s", p.opts.Workdir, code, root)
	}
	h.root = root
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: name, Root: root,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	h.fs = execfs.New(h.fsRun, execfs.Options{Root: root, Provider: Name})
	return h, nil
}

// raw runs argv to completion through the process API, stdout into out.
func (h *handle) raw(ctx context.Context, op string, argv []string, out *bytes.Buffer) (int, error) {
	st, err := backend{h}.Start(ctx, op, execproc.Spec{Argv: argv, Dir: "/"})
	if err != nil {
		return -1, err
	}
	var discard bytes.Buffer
	err = st.Copy(out, &discard)
	st.Close()
	if err != nil {
		return -1, sandbox.Wrap(sandbox.Unavailable, op, h.name, err)
	}
	return st.Exit(ctx)
}

// b64Stdout runs "$@" with its stdout base64-encoded and keeps its exit
// status: the process API carries output as JSON strings, which cannot
// hold bytes that are not UTF-8, and a file read must be byte-exact.
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

// ID returns the sandbox's name.
func (h *handle) ID() string { return h.name }

// Provider returns "blaxel".
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

// ConnectPort returns the sandbox's preview of port (preview "corral-<port>",
// made when missing). A private preview (the default) comes with a fresh
// token valid for PreviewTTL, sent in the X-Blaxel-Preview-Token header.
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	op := Name + ".port"
	if port < 1 || port > 65535 {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.InvalidArgument, op, h.name, "port %d", port)
	}
	pname := "corral-" + strconv.Itoa(port)
	base := "/sandboxes/" + url.PathEscape(h.name) + "/previews"
	var pv Preview
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.name, Method: http.MethodGet, Path: base + "/" + pname}, &pv)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		body := map[string]any{"metadata": map[string]any{"name": pname},
			"spec": map[string]any{"port": port, "public": h.p.opts.PublicPreviews}}
		_, err = h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.name, Method: http.MethodPost, Path: base, JSON: body}, &pv)
	}
	if err != nil {
		return sandbox.Endpoint{}, err
	}
	if pv.Spec.URL == "" {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Unavailable, op, h.name, "blaxel gave preview %s no url", pname)
	}
	ep := sandbox.Endpoint{URL: pv.Spec.URL}
	if pv.Spec.Public {
		return ep, nil
	}
	var tok PreviewToken
	body := map[string]any{"metadata": map[string]any{"name": "corral-" + randomHex(6)},
		"spec": map[string]any{"expiresAt": time.Now().Add(h.p.opts.PreviewTTL).UTC().Format(time.RFC3339)}}
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.name, Method: http.MethodPost, Path: base + "/" + pname + "/tokens", JSON: body}, &tok); err != nil {
		return sandbox.Endpoint{}, err
	}
	ep.Token = tok.Spec.Token
	ep.Headers = map[string]string{PreviewTokenHeader: tok.Spec.Token}
	return ep, nil
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot is unsupported (a Blaxel snapshot is not guaranteed to outlive
// its source).
func (h *handle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, sandbox.Unsupported(Name, "snapshots")
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy deletes the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.name) }
