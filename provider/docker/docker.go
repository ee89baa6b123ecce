package docker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "docker"

// DefaultSnapshotRepository is the image repository snapshots and fork
// images are committed to.
const DefaultSnapshotRepository = "corral-snapshot"

// keepAlive is the container's main process: it sleeps until stopped and
// exits cleanly on SIGTERM. It needs nothing but sh and sleep.
var keepAlive = []string{"sh", "-c", `trap 'exit 0' TERM; while :; do sleep 3600 & wait; done`}

// Options configure the Docker provider. Image is required to create
// sandboxes (resume, restore, destroy, list and prune work without it);
// every other field has a default.
type Options struct {
	// Image is the image new sandboxes run, e.g. "node:22". Pull says
	// when it is pulled from its registry.
	Image string
	// Pull is the pull policy for Image: PullMissing (the default) pulls
	// it when the engine lacks it, PullAlways before every Create,
	// PullNever never. Snapshot images are never pulled.
	Pull PullPolicy
	// OnPull, when set, receives each step of a pull (one per layer
	// state change). It is called from the goroutine running Create.
	OnPull func(PullProgress)
	// DockerConfig is the directory holding the config.json whose auths
	// entries authenticate pulls. Default: DOCKER_CONFIG, else ~/.docker.
	// Credential helpers (credsStore, credHelpers) are not run.
	DockerConfig string
	// Host is the engine's address, e.g. "unix:///var/run/docker.sock" or
	// "tcp://127.0.0.1:2375". Default: DOCKER_HOST and the other DOCKER_*
	// variables, as the docker CLI reads them, else the local socket.
	Host string
	// Workdir is the real workspace root inside the container, behind the
	// portable "/workspace". Default "/workspace".
	Workdir string
	// Network is the Docker network mode for sandboxes that are not
	// denied the network. Default "bridge".
	Network string
	// Memory limits the container's memory in bytes, swap included (the
	// container gets no swap beyond it). Default DefaultMemory (2 GiB);
	// Unlimited (any negative value) means no limit.
	Memory int64
	// CPUs limits the container to this many CPUs' worth of time
	// (fractions allowed, at least 0.01). Default DefaultCPUs (2);
	// Unlimited (any negative value) means no limit.
	CPUs float64
	// PidsLimit caps the number of processes and threads in the
	// container. Default DefaultPidsLimit (1024); Unlimited (any negative
	// value) means no limit.
	PidsLimit int64
	// User runs the container's processes as this user ("uid[:gid]" or a
	// name the image knows). Default: the image's user.
	User string
	// Labels are added to every container (never secrets).
	Labels map[string]string
	// ExtraHosts are "host:ip" lines added to /etc/hosts. Nil means
	// "host.docker.internal:host-gateway", so sandboxes reach the host;
	// an empty non-nil slice adds none. Sandboxes denied the network get
	// none.
	ExtraHosts []string
	// Ports are container ports (TCP) published on 127.0.0.1 at a random
	// host port each; Handle.ConnectPort reaches only these. With none,
	// the provider does not claim the ports capability.
	Ports []int
	// KillGrace is how long Process.Kill waits after SIGTERM before
	// SIGKILL. Default 2s.
	KillGrace time.Duration
	// SnapshotRepository is the image repository snapshots are committed
	// to. Default DefaultSnapshotRepository.
	SnapshotRepository string
	// Logger receives debug records and warnings about teardown. Default:
	// discard.
	Logger *slog.Logger
}

// Provider creates sandboxes as Docker containers. Create it with New; it
// is safe for concurrent use.
type Provider struct {
	opts   Options
	limits Limits
	cli    *client.Client
	log    *slog.Logger
	caps   sandbox.Capabilities
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a Docker provider. It does not contact the engine: the first
// call that needs it connects and negotiates the API version (use Ping to
// check the engine up front). It fails with InvalidArgument when an option
// is malformed.
func New(opts Options) (*Provider, error) { return newProvider(opts) }

// newProvider is New with extra client options (tests count calls).
func newProvider(opts Options, extra ...client.Opt) (*Provider, error) {
	if opts.Workdir == "" {
		opts.Workdir = sandbox.WorkspaceRoot
	}
	if !path.IsAbs(opts.Workdir) || path.Clean(opts.Workdir) != opts.Workdir || opts.Workdir == "/" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.new", opts.Workdir, "Options.Workdir must be a clean absolute path below /")
	}
	if opts.Network == "" {
		opts.Network = "bridge"
	}
	if opts.ExtraHosts == nil {
		opts.ExtraHosts = []string{"host.docker.internal:host-gateway"}
	}
	for _, port := range opts.Ports {
		if port < 1 || port > 65535 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.new", strconv.Itoa(port), "Options.Ports: not a TCP port")
		}
	}
	limits, err := limitsOf(opts)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.new", "", "%v", err)
	}
	pull, err := ParsePullPolicy(string(opts.Pull))
	if err != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.new", string(opts.Pull), "Options.Pull: %v", err)
	}
	opts.Pull = pull
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	if opts.SnapshotRepository == "" {
		opts.SnapshotRepository = DefaultSnapshotRepository
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	copts := []client.Opt{client.FromEnv}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	copts = append(copts, extra...)
	cli, err := client.New(copts...)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, "docker.new", opts.Host, err)
	}
	return &Provider{
		opts:   opts,
		limits: limits,
		cli:    cli,
		log:    log,
		caps: sandbox.Capabilities{
			FS:                  true,
			Exec:                true,
			Env:                 true,
			Ports:               len(opts.Ports) > 0,
			BackgroundProcesses: true,
			WritableStdin:       true,
			KillableProcesses:   true,
			Snapshots:           true,
			NetworkPolicy:       true,
			DurableFilesystem:   true,
			Fork:                true,
			OwnProcessTable:     true,
		},
	}, nil
}

// Name returns "docker".
func (p *Provider) Name() string { return Name }

// Capabilities returns what Docker sandboxes can do. Ports is true only
// when Options.Ports publishes at least one port.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Host returns the engine address the provider talks to.
func (p *Provider) Host() string { return p.cli.DaemonHost() }

// Ping checks that the engine answers and negotiates the API version. An
// unreachable engine is an error with code Unavailable that names the
// address.
func (p *Provider) Ping(ctx context.Context) error {
	_, err := p.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		e := p.apiError("docker.ping", "", err)
		if sandbox.CodeOf(e) == sandbox.Internal {
			e = &sandbox.Error{Code: sandbox.Unavailable, Op: "docker.ping", Msg: "docker: no engine reachable at " + p.cli.DaemonHost(), Err: err}
		}
		return e
	}
	return nil
}

// CheckImage reports whether Options.Image is present on the engine: nil,
// or an error with code NotFound that says how to make it present.
func (p *Provider) CheckImage(ctx context.Context) error {
	_, err := p.cli.ImageInspect(ctx, p.opts.Image)
	if cerrdefs.IsNotFound(err) {
		return p.missingImage("docker.image", p.opts.Image, err)
	}
	return p.apiError("docker.image", p.opts.Image, err)
}

// Close releases the provider's connections to the engine. Sandboxes keep
// running.
func (p *Provider) Close() error { return p.cli.Close() }

// Create makes and starts a new sandbox from Options.Image.
//
// The container is named after opts.ID when given (a digest-derived name
// when opts.ID is not a valid container name) and labelled as corral's.
// opts.Env is kept in the handle and sent with every command; it never
// reaches the container's configuration, so neither docker inspect nor a
// snapshot image holds it. An existing container with that name is an
// error with code AlreadyExists.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if p.opts.Image == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.create", opts.ID, "no image: set Options.Image")
	}
	if err := p.ensureImage(ctx, "docker.create", p.opts.Image); err != nil {
		return nil, err
	}
	h, err := p.create(ctx, "docker.create", p.opts.Image, opts, nil)
	if err != nil && p.opts.Pull == PullMissing && imageMissing(err) {
		if err := p.pull(ctx, "docker.create", p.opts.Image); err != nil {
			return nil, err
		}
		h, err = p.create(ctx, "docker.create", p.opts.Image, opts, nil)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// RestoreSnapshot creates a new sandbox from a snapshot image taken with
// Handle.Snapshot (its sandbox.Snapshot.ID). opts work as in Create; the
// environment is not part of a snapshot and must come from opts.Env or
// SetEnv.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if snapshot == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "docker.restore", "", "empty snapshot id")
	}
	return p.create(ctx, "docker.restore", snapshot, opts, map[string]string{LabelFrom: snapshot})
}

// DeleteSnapshot removes a snapshot image corral made. A snapshot that is
// gone is fine; an image corral did not make is InvalidArgument (corral
// never deletes other images); one a container still uses is
// FailedPrecondition.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	const op = "docker.delete-snapshot"
	if snapshot == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, op, "", "empty snapshot id")
	}
	im, err := p.cli.ImageInspect(ctx, snapshot)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return p.apiError(op, snapshot, err)
	}
	if im.Config == nil || im.Config.Labels[LabelManaged] != "true" || im.Config.Labels[LabelSnapshot] == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, op, snapshot, "not a corral snapshot image")
	}
	if _, err := p.cli.ImageRemove(ctx, snapshot, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
		if cerrdefs.IsConflict(err) {
			return sandbox.Errorf(sandbox.FailedPrecondition, op, snapshot, "a sandbox still uses the snapshot: %v", err)
		}
		return p.apiError(op, snapshot, err)
	}
	return nil
}

// create makes and starts a container from image. extra labels are added
// to corral's own.
func (p *Provider) create(ctx context.Context, op, image string, opts sandbox.CreateOptions, extra map[string]string) (*handle, error) {
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	name := newName()
	if opts.ID != "" {
		name = containerName(opts.ID)
	}
	deny := opts.Network == sandbox.NetworkDeny
	userLabels := map[string]string{}
	for k, v := range p.opts.Labels {
		userLabels[k] = v
	}
	for k, v := range opts.Labels {
		userLabels[k] = v
	}
	labels := map[string]string{}
	for k, v := range userLabels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	// Every corral label is set, empty when unused, so that none is
	// inherited from the labels of a snapshot image.
	for _, k := range []string{LabelKey, LabelFrom, LabelForkOf, LabelSnapshot, LabelSnapshotOf, LabelSnapshotLabel} {
		if _, ok := labels[k]; !ok {
			labels[k] = ""
		}
	}
	labels[LabelManaged] = "true"
	labels[LabelSandboxID] = name
	labels[LabelKey] = opts.ID
	labels[LabelCreatedAt] = time.Now().UTC().Format(time.RFC3339Nano)
	labels[LabelUser] = p.opts.User

	// With a non-root Options.User the container itself runs as root and
	// every command, file operation and kill runs as the user: root is
	// needed once, to hand the workspace over (under no-new-privileges a
	// root exec in a non-root container has no capabilities).
	user := p.opts.User
	cfg := &container.Config{
		Image:      image,
		Entrypoint: keepAlive,
		WorkingDir: p.opts.Workdir,
		User:       user,
		Labels:     labels,
		// Env stays unset: the image's environment only. Secrets travel
		// per exec.
	}
	init := true
	hc := &container.HostConfig{
		NetworkMode: container.NetworkMode(p.opts.Network),
		SecurityOpt: []string{"no-new-privileges"},
		Init:        &init,
	}
	hc.Resources, hc.PidsLimit = p.limits.resources()
	if nonRoot(user) {
		cfg.User = "0:0"
	}
	switch {
	case deny:
		hc.NetworkMode = "none"
	case len(opts.Egress) > 0:
		// The allow-list is the gateway's: the container's only way out.
		gw, err := p.EgressGateway(ctx)
		if err != nil {
			return nil, err
		}
		hc.NetworkMode = container.NetworkMode(EgressNetwork)
		// Docker's embedded resolver forwards outside names to the
		// gateway's DNS there, which answers listed names only.
		hc.DNS = []netip.Addr{netip.MustParseAddr(gw)}
	default:
		hc.ExtraHosts = p.opts.ExtraHosts
		if len(p.opts.Ports) > 0 {
			cfg.ExposedPorts = network.PortSet{}
			hc.PortBindings = network.PortMap{}
			for _, port := range p.opts.Ports {
				cp, _ := network.PortFrom(uint16(port), network.TCP)
				cfg.ExposedPorts[cp] = struct{}{}
				hc.PortBindings[cp] = []network.PortBinding{{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1})}}
			}
		}
	}

	res, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Config: cfg, HostConfig: hc, Name: name})
	if err != nil {
		switch {
		case cerrdefs.IsConflict(err) || cerrdefs.IsAlreadyExists(err):
			return nil, &sandbox.Error{Code: sandbox.AlreadyExists, Op: op, ID: opts.ID,
				Msg: fmt.Sprintf("a container named %q exists already", name), Err: err}
		case cerrdefs.IsNotFound(err) && strings.Contains(strings.ToLower(err.Error()), "image"):
			if op == "docker.restore" {
				return nil, &sandbox.Error{Code: sandbox.NotFound, Op: op, ID: image, Msg: "no such snapshot image", Err: err}
			}
			return nil, p.missingImage(op, image, err)
		}
		return nil, p.apiError(op, name, err)
	}
	for _, w := range res.Warnings {
		// e.g. an engine without swap accounting: the memory limit
		// holds, the no-swap part does not.
		p.log.Warn("docker: the engine warned about a new container", "container", name, "warning", w)
	}
	cid := res.ID
	fail := func(err error) (*handle, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if _, rerr := p.cli.ContainerRemove(rctx, cid, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); rerr != nil {
			p.log.Warn("docker: removing a half-created container failed", "container", name, "err", rerr)
		}
		return nil, err
	}
	if opts.SourceDir != "" {
		if err := p.copySource(ctx, cid, opts.SourceDir); err != nil {
			return fail(sandbox.Wrap(sandbox.Internal, op, name, err))
		}
	}
	if _, err := p.cli.ContainerStart(ctx, cid, client.ContainerStartOptions{}); err != nil {
		return fail(p.apiError(op, name, err))
	}
	h := p.newHandle(name, cid, p.opts.Workdir, deny, user)
	if nonRoot(user) {
		// Docker creates a missing working directory owned by root, and
		// copies SourceDir as root: hand them to the user.
		flag := "-h"
		if opts.SourceDir != "" {
			flag = "-R"
		}
		res, err := h.run(ctx, op, []string{"sh", "-c", `mkdir -p "$3" && chown "$1" "$2" "$3"`, "sh", flag, user, p.opts.Workdir}, nil, "0:0")
		if err == nil && res.ExitCode != 0 {
			err = sandbox.Errorf(sandbox.FailedPrecondition, op, name, "cannot give %s to user %s: %s", p.opts.Workdir, user, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			return fail(err)
		}
	}
	p.log.Debug("docker: sandbox created", "id", name, "container", cid, "image", image)
	h.userLabels = userLabels
	if err := h.env.Set(opts.Env); err != nil {
		return fail(err)
	}
	return h, nil
}

// copySource copies a host directory into the workspace of a created
// container through the archive API.
func (p *Provider) copySource(ctx context.Context, cid, dir string) error {
	r, err := tarDir(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = p.cli.CopyToContainer(ctx, cid, client.CopyToContainerOptions{
		DestinationPath: p.opts.Workdir,
		Content:         r,
	})
	return err
}

// Resume reconnects to a sandbox by its id (the container name), its
// container id or the CreateOptions.ID it was created with, and starts it
// if it was stopped. A removed container, or one that corral did not make,
// is an error with code NotFound. The environment given at create is not
// persisted: re-apply it with SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	info, err := p.lookup(ctx, "docker.resume", id)
	if err != nil {
		return nil, err
	}
	if info.State != nil {
		switch {
		case info.State.Paused:
			if _, err := p.cli.ContainerUnpause(ctx, info.ID, client.ContainerUnpauseOptions{}); err != nil {
				return nil, p.apiError("docker.resume", id, err)
			}
		case !info.State.Running:
			if _, err := p.cli.ContainerStart(ctx, info.ID, client.ContainerStartOptions{}); err != nil {
				return nil, p.apiError("docker.resume", id, err)
			}
		}
	}
	name := strings.TrimPrefix(info.Name, "/")
	workdir := p.opts.Workdir
	deny := false
	if info.Config != nil && info.Config.WorkingDir != "" {
		workdir = info.Config.WorkingDir
	}
	if info.HostConfig != nil && info.HostConfig.NetworkMode == "none" {
		deny = true
	}
	user := ""
	if info.Config != nil {
		user = info.Config.Labels[LabelUser]
	}
	h := p.newHandle(name, info.ID, workdir, deny, user)
	if info.Config != nil {
		for k, v := range info.Config.Labels {
			if !strings.HasPrefix(k, "dev.corral.") {
				h.userLabels[k] = v
			}
		}
		if info.Config.Labels[LabelForkOf] != "" {
			h.forkImage = info.Config.Labels[LabelFrom]
		}
	}
	return h, nil
}

// lookup finds corral's container by sandbox id, container id or key.
func (p *Provider) lookup(ctx context.Context, op, id string) (container.InspectResponse, error) {
	if id == "" {
		return container.InspectResponse{}, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox id")
	}
	candidates := []string{id}
	if n := containerName(id); n != id {
		candidates = append(candidates, n)
	}
	for _, c := range candidates {
		res, err := p.cli.ContainerInspect(ctx, c, client.ContainerInspectOptions{})
		if err == nil {
			if res.Container.Config == nil || res.Container.Config.Labels[LabelManaged] != "true" {
				return container.InspectResponse{}, sandbox.Errorf(sandbox.NotFound, op, id, "container %s is not a corral sandbox", c)
			}
			return res.Container, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return container.InspectResponse{}, p.apiError(op, id, err)
		}
	}
	// Last, the key label (a container renamed behind corral's back).
	list, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true", LabelKey+"="+id)})
	if err != nil {
		return container.InspectResponse{}, p.apiError(op, id, err)
	}
	if len(list.Items) == 1 {
		res, err := p.cli.ContainerInspect(ctx, list.Items[0].ID, client.ContainerInspectOptions{})
		if err == nil {
			return res.Container, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return container.InspectResponse{}, p.apiError(op, id, err)
		}
	}
	return container.InspectResponse{}, sandbox.Errorf(sandbox.NotFound, op, id, "no such sandbox (no corral container with that id, name or key)")
}

// Destroy force-removes the sandbox's container and its anonymous
// volumes, killing everything in it. A sandbox that is already gone is
// fine; a container corral did not make is left alone (NotFound).
func (p *Provider) Destroy(ctx context.Context, id string) error {
	info, err := p.lookup(ctx, "docker.destroy", id)
	if sandbox.CodeOf(err) == sandbox.NotFound && !strings.Contains(err.Error(), "not a corral sandbox") {
		return nil
	}
	if err != nil {
		return err
	}
	forkImage := ""
	if info.Config.Labels[LabelForkOf] != "" {
		forkImage = info.Config.Labels[LabelFrom]
	}
	return p.remove(ctx, "docker.destroy", id, info.ID, forkImage)
}

// remove force-removes a container, then the fork image it was made from.
func (p *Provider) remove(ctx context.Context, op, id, cid, forkImage string) error {
	_, err := p.cli.ContainerRemove(ctx, cid, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		// A removal already under way is as good as done.
		if !(cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "in progress")) {
			return p.apiError(op, id, err)
		}
	}
	p.log.Debug("docker: sandbox destroyed", "id", id, "container", cid)
	if forkImage != "" {
		if _, err := p.cli.ImageRemove(ctx, forkImage, client.ImageRemoveOptions{PruneChildren: true}); err != nil && !cerrdefs.IsNotFound(err) {
			p.log.Warn("docker: removing a fork image failed; Prune will retry", "image", forkImage, "err", err)
		}
	}
	return nil
}

// nonRoot reports whether user names someone other than root.
func nonRoot(user string) bool {
	switch user {
	case "", "root", "0", "0:0", "root:root":
		return false
	}
	return true
}

// tagFor returns a fresh image reference for a snapshot of sandbox id.
func (p *Provider) tagFor(id string) string {
	now := time.Now().UTC()
	return p.opts.SnapshotRepository + ":" + sanitize(id, 80) + strconv.FormatInt(now.UnixNano(), 10)
}
