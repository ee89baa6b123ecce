package e2b

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	fspb "github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem"
	"github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem/filesystemconnect"
	"github.com/d10ffeed/corral/provider/e2b/internal/envd/process/processconnect"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one sandbox.
type handle struct {
	p       *Provider
	id      string
	domain  string
	traffic string // trafficAccessToken, "" with public traffic
	root    string
	fs      sandbox.FS
	run     *execproc.Runner
	proc    processconnect.ProcessClient
	fsc     filesystemconnect.FilesystemClient

	envdBase string       // envd's base URL
	envdHTTP *http.Client // adds envd's headers

	env *execproc.Env // create env, then SetEnv overlays; never sent to E2B
}

var _ sandbox.Handle = (*handle)(nil)

// SandboxID returns the E2B sandbox id behind a handle made by this
// provider, and false for any other handle.
func SandboxID(h sandbox.Handle) (string, bool) {
	var eh *handle
	if h == nil || !sandbox.As(h, &eh) {
		return "", false
	}
	return eh.id, true
}

// envdTransport adds envd's headers to every request: the access token,
// the sandbox routing headers and the user.
type envdTransport struct {
	base http.RoundTripper
	hdr  http.Header
}

func (t envdTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.hdr {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}

// envdURL is the base URL of the sandbox's envd.
func (p *Provider) envdURL(id, domain string) string {
	if p.opts.SandboxURL != "" {
		return p.opts.SandboxURL
	}
	if slices.Contains([]string{"e2b.app", "e2b.dev", "e2b.pro"}, domain) {
		return "https://sandbox." + domain
	}
	return "https://" + strconv.Itoa(EnvdPort) + "-" + id + "." + domain
}

// open makes the handle of sb and finds (fresh: makes) its workspace.
func (p *Provider) open(ctx context.Context, sb Sandbox, env map[string]string, fresh bool) (*handle, error) {
	domain := p.opts.Domain
	if sb.Domain != nil && *sb.Domain != "" {
		domain = *sb.Domain
	}
	h := &handle{p: p, id: sb.SandboxID, domain: domain, env: execproc.NewEnv(env)}
	if sb.TrafficAccessToken != nil {
		h.traffic = *sb.TrafficAccessToken
	}
	hdr := http.Header{}
	if sb.EnvdAccessToken != "" {
		hdr.Set(HeaderAccessToken, sb.EnvdAccessToken)
	}
	hdr.Set(HeaderSandboxID, sb.SandboxID)
	hdr.Set(HeaderSandboxPort, strconv.Itoa(EnvdPort))
	hdr.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(p.opts.User+":")))
	base := p.opts.HTTPClient.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc := &http.Client{Transport: envdTransport{base: base, hdr: hdr}}
	u := p.envdURL(sb.SandboxID, domain)
	h.envdBase, h.envdHTTP = u, hc
	h.proc = processconnect.NewProcessClient(hc, u)
	h.fsc = filesystemconnect.NewFilesystemClient(hc, u)
	root, err := h.workspace(ctx, fresh)
	if err != nil {
		return nil, err
	}
	h.root = root
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: h.id, Root: root,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	h.fs = execfs.New(func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
		return h.run.Run(ctx, Name+".fs", cmd.Argv(), cmd.Stdin, "")
	}, execfs.Options{Root: root, Provider: Name})
	return h, nil
}

// workspace returns the workspace's absolute path: MakeDir on a fresh
// sandbox (envd answers the path it made), Stat otherwise, one call
// either way unless the first finds the other case.
func (h *handle) workspace(ctx context.Context, fresh bool) (string, error) {
	op := Name + ".workspace"
	w := h.p.opts.Workdir
	mk := func() (string, error) {
		r, err := h.fsc.MakeDir(ctx, connect.NewRequest(&fspb.MakeDirRequest{Path: w}))
		if err != nil {
			return "", err
		}
		return r.Msg.GetEntry().GetPath(), nil
	}
	st := func() (string, error) {
		r, err := h.fsc.Stat(ctx, connect.NewRequest(&fspb.StatRequest{Path: w}))
		if err != nil {
			return "", err
		}
		if r.Msg.GetEntry().GetType() != fspb.FileType_FILE_TYPE_DIRECTORY {
			return "", sandbox.Errorf(sandbox.FailedPrecondition, op, h.id, "the workdir %s is not a directory", w)
		}
		return r.Msg.GetEntry().GetPath(), nil
	}
	var path string
	var err error
	if fresh {
		path, err = mk()
		if connect.CodeOf(err) == connect.CodeAlreadyExists {
			path, err = st()
		}
	} else {
		path, err = st()
		if connect.CodeOf(err) == connect.CodeNotFound {
			path, err = mk()
		}
	}
	if err != nil {
		return "", rpcError(op, h.id, err)
	}
	if !filepath.IsAbs(path) {
		return "", sandbox.Errorf(sandbox.Internal, op, h.id, "envd answered a workdir path that is not absolute: %q", path)
	}
	return path, nil
}

// rpcError gives a Connect error its corral code, naming E2B's envd.
func rpcError(op, id string, err error) error {
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	var code sandbox.Code
	switch connect.CodeOf(err) {
	case connect.CodeNotFound:
		code = sandbox.NotFound
	case connect.CodeAlreadyExists:
		code = sandbox.AlreadyExists
	case connect.CodeInvalidArgument, connect.CodeOutOfRange:
		code = sandbox.InvalidArgument
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		code = sandbox.PermissionDenied
	case connect.CodeResourceExhausted:
		code = sandbox.ResourceExhausted
	case connect.CodeFailedPrecondition:
		code = sandbox.FailedPrecondition
	case connect.CodeUnimplemented:
		code = sandbox.Unimplemented
	case connect.CodeDeadlineExceeded:
		code = sandbox.DeadlineExceeded
	case connect.CodeCanceled:
		code = sandbox.Canceled
	case connect.CodeInternal, connect.CodeDataLoss:
		code = sandbox.Internal
	default:
		code = sandbox.Unavailable
	}
	msg := err.Error()
	var ce *connect.Error
	if errors.As(err, &ce) {
		msg = ce.Message()
	}
	return sandbox.Errorf(code, op, id, "E2B envd: %s", msg)
}

// ID returns the E2B sandbox id.
func (h *handle) ID() string { return h.id }

// Provider returns "e2b".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path in the sandbox.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.caps }

// FS returns the file system.
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return h.run.Exec(ctx, cmd)
}

// Spawn starts cmd.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return h.run.Spawn(ctx, cmd)
}

// ConnectPort returns https://<port>-<id>.<domain>, with the traffic
// token header when the sandbox's public traffic is off.
func (h *handle) ConnectPort(_ context.Context, port int) (sandbox.Endpoint, error) {
	if port < 1 || port > 65535 {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.InvalidArgument, Name+".port", h.id, "port %d is out of range", port)
	}
	ep := sandbox.Endpoint{URL: h.p.PortURL(h.id, h.domain, port)}
	if h.traffic != "" {
		ep.Token = h.traffic
		ep.Headers = map[string]string{HeaderTrafficToken: h.traffic}
	}
	return ep, nil
}

// PortURL is the URL of a sandbox's port: https://<port>-<id>.<domain>.
func (p *Provider) PortURL(id, domain string, port int) string {
	if domain == "" {
		domain = p.opts.Domain
	}
	if p.opts.PortURL != nil {
		return p.opts.PortURL(id, domain, port)
	}
	return "https://" + strconv.Itoa(port) + "-" + id + "." + domain
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot makes a persistent snapshot (an E2B template that outlives the
// sandbox; the sandbox pauses briefly).
func (h *handle) Snapshot(ctx context.Context, label string) (sandbox.Snapshot, error) {
	var info SnapshotInfo
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".snapshot", ID: h.id, Method: http.MethodPost,
		Path: "/sandboxes/" + url.PathEscape(h.id) + "/snapshots", JSON: SnapshotRequest{Name: snapshotName(h.id, label)}}, &info)
	if err != nil {
		return sandbox.Snapshot{}, err
	}
	if info.SnapshotID == "" {
		return sandbox.Snapshot{}, sandbox.Errorf(sandbox.Internal, Name+".snapshot", h.id, "E2B answered a snapshot without an id")
	}
	return sandbox.Snapshot{ID: info.SnapshotID, Label: label, SandboxID: h.id, CreatedAt: time.Now().UTC()}, nil
}

// Fork makes a new sandbox from a checkpoint of this one (E2B's fork);
// it keeps this handle's environment.
func (h *handle) Fork(ctx context.Context) (sandbox.Handle, error) {
	var res []ForkResult
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".fork", ID: h.id, Method: http.MethodPost,
		Path: "/sandboxes/" + url.PathEscape(h.id) + "/fork", JSON: ForkRequest{Timeout: h.p.seconds(), Count: 1}}, &res)
	if err != nil {
		return nil, err
	}
	if len(res) != 1 || res[0].Sandbox == nil {
		msg := "no sandbox in the answer"
		code := sandbox.Internal
		if len(res) == 1 && res[0].Error != nil {
			msg, code = res[0].Error.Message, cloudhttp.CodeForStatus(res[0].Error.Code)
		}
		return nil, sandbox.Errorf(code, Name+".fork", h.id, "E2B could not start the fork: %s", msg)
	}
	f, err := h.p.open(ctx, *res[0].Sandbox, h.env.Copy(), false)
	if err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = h.p.Destroy(dctx, res[0].Sandbox.SandboxID)
		return nil, err
	}
	return f, nil
}

// Destroy kills the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.id) }

// SetTimeout sets the sandbox's time to live to d from now (POST
// /sandboxes/{id}/timeout) for a handle made by this provider.
func SetTimeout(ctx context.Context, hd sandbox.Handle, d time.Duration) error {
	var h *handle
	if hd == nil || !sandbox.As(hd, &h) {
		return sandbox.Errorf(sandbox.InvalidArgument, Name+".timeout", "", "not an E2B handle")
	}
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".timeout", ID: h.id, Method: http.MethodPost,
		Path: "/sandboxes/" + url.PathEscape(h.id) + "/timeout", JSON: TimeoutRequest{Timeout: int(d / time.Second)}, Idempotent: true}, nil)
	return err
}

// Pause pauses the sandbox (memory false keeps only its filesystem);
// Resume wakes it. Already paused is success.
func Pause(ctx context.Context, hd sandbox.Handle, memory bool) error {
	var h *handle
	if hd == nil || !sandbox.As(hd, &h) {
		return sandbox.Errorf(sandbox.InvalidArgument, Name+".pause", "", "not an E2B handle")
	}
	_, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".pause", ID: h.id, Method: http.MethodPost,
		Path: "/sandboxes/" + url.PathEscape(h.id) + "/pause", JSON: PauseRequest{Memory: &memory}, Idempotent: true}, nil)
	if sandbox.CodeOf(err) == sandbox.AlreadyExists { // 409: already paused
		return nil
	}
	return err
}
