package kubernetes

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "kubernetes"

// DefaultImage is the image sandboxes run when Options.Image is empty: the
// static-BusyBox image scripts/setup-k8s.sh imports into the test
// cluster's containerd (pulled never).
const DefaultImage = "corral.local/busybox:1"

// Default resources of a sandbox's container. The requests are small so
// that many sandboxes fit a small node; the limits bound a runaway command.
const (
	DefaultCPULimit      = "2"
	DefaultMemoryLimit   = "2Gi"
	DefaultCPURequest    = "10m"
	DefaultMemoryRequest = "32Mi"
)

// keepAlive is the container's main process (PID 1 of the pod's PID
// namespace): it sleeps until stopped, exits cleanly on SIGTERM, and its
// wait reaps the orphans re-parented to it. It needs only sh and sleep.
var keepAlive = []string{"sh", "-c", `trap 'exit 0' TERM; while :; do sleep 3600 & wait; done`}

// Options configure the Kubernetes provider. Every field has a default.
type Options struct {
	// Kubeconfig is the path of a kubeconfig file. Default: KUBECONFIG and
	// ~/.kube/config as kubectl reads them, else the in-cluster
	// configuration (a daemon running in a Pod).
	Kubeconfig string
	// Context is the kubeconfig context to use. Default: its current one.
	Context string
	// Namespace is where sandbox Pods are made. Default: the kubeconfig
	// context's namespace, else "default".
	Namespace string
	// Image is the image sandboxes run. Default DefaultImage. It needs a
	// POSIX sh (the launcher and the file system are shell scripts).
	Image string
	// PullPolicy is the container's image pull policy. Default: Never for
	// images under "corral.local/", else IfNotPresent.
	PullPolicy corev1.PullPolicy
	// Workdir is the workspace directory in the container, an emptyDir
	// volume. Default "/workspace".
	Workdir string
	// CPULimit, MemoryLimit, CPURequest and MemoryRequest are the
	// container's resources as Kubernetes quantities ("500m", "4Gi").
	// Defaults DefaultCPULimit, DefaultMemoryLimit, DefaultCPURequest and
	// DefaultMemoryRequest; "0" leaves one unset.
	CPULimit, MemoryLimit, CPURequest, MemoryRequest string
	// RuntimeClassName selects a sandboxing runtime the cluster offers
	// (gVisor, Kata). Default: the cluster's.
	RuntimeClassName string
	// ServiceAccount is the Pod's service account. Its token is never
	// mounted. Default: the namespace's default.
	ServiceAccount string
	// NodeSelector constrains the nodes a sandbox may run on.
	NodeSelector map[string]string
	// Tolerations let sandbox Pods run on tainted nodes.
	Tolerations []corev1.Toleration
	// ImagePullSecrets are names of existing Secrets in Namespace that
	// hold registry credentials for Image (corral never makes them).
	ImagePullSecrets []string
	// Labels are added to every Pod (never secrets).
	Labels map[string]string
	// Annotations are added to every object corral creates (Pods,
	// SandboxClaims and SandboxTemplates, PersistentVolumeClaims,
	// Services, NetworkPolicies); never secrets. The corral.dev/ prefix is
	// corral's own.
	Annotations map[string]string
	// Workspace is the volume at Workdir: WorkspaceEmptyDir (default; the
	// files go with the Pod) or WorkspacePVC, a PersistentVolumeClaim per
	// sandbox that outlives its Pod (Pods mode only; see workspace.go).
	Workspace Workspace
	// StorageClass is the workspace claim's storage class. Default: the
	// cluster's default class.
	StorageClass string
	// WorkspaceSize is the workspace claim's requested size. Default
	// DefaultWorkspaceSize.
	WorkspaceSize string
	// Ports is how ConnectPort reaches a sandbox's port: PortsForward
	// (default), through the API server's port-forward, or PortsService,
	// a ClusterIP Service per port (see ports.go).
	Ports PortsMode
	// DenyEnforcement is how a sandbox created with sandbox.NetworkDeny
	// is cut off: DenyBoth (default), DenyInit or DenyNetworkPolicy (see
	// network.go).
	DenyEnforcement DenyEnforcement
	// EgressPolicy is how an egress allow-list is enforced: EgressRefuse
	// (default: refused, since a NetworkPolicy is only as good as the
	// network plugin) or EgressNetworkPolicy (a NetworkPolicy of ipBlocks,
	// trusting the plugin; see egress.go).
	EgressPolicy EgressPolicy
	// Mode is how sandboxes are made: ModePods (default), a Pod each, or
	// ModeSandbox, a SandboxClaim each through agent-sandbox (see
	// agentsandbox.go).
	Mode Mode
	// Template is, in Sandbox mode, the name of an existing SandboxTemplate
	// the claims use. Default: corral's own, made from these options and
	// named after a digest of the pod shape.
	Template string
	// WarmPool is, in Sandbox mode, the size of a SandboxWarmPool of the
	// template that corral makes (named like the template) so claims are
	// served from running pods. Default 0: none made (claims still take a
	// warm pod from a pool someone else made for the template).
	WarmPool int32
	// StartTimeout bounds how long Create and Resume wait for a Pod to
	// run. Default 2 minutes. A Pod that cannot start (unschedulable, an
	// image that cannot be pulled) fails sooner, with the reason.
	StartTimeout time.Duration
	// KillGrace is how long Process.Kill waits after SIGTERM before
	// SIGKILL. Default 2s.
	KillGrace time.Duration
	// Logger receives debug records and warnings. Default: discard.
	Logger *slog.Logger

	// config, when set, is used instead of loading Kubeconfig (tests).
	config *rest.Config
}

// Provider creates sandboxes as Pods. Create it with New; it is safe for
// concurrent use.
type Provider struct {
	opts      Options
	cfg       *rest.Config
	core      *coreClient
	ns        string
	resources corev1.ResourceRequirements
	log       *slog.Logger
	caps      sandbox.Capabilities
	fwd       forwards
	tmpl      templates
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a Kubernetes provider. It reads the kubeconfig but does not
// contact the cluster (Ping does). A malformed option or kubeconfig is
// InvalidArgument.
func New(opts Options) (*Provider, error) {
	const op = "kubernetes.new"
	if opts.Workdir == "" {
		opts.Workdir = sandbox.WorkspaceRoot
	}
	if !path.IsAbs(opts.Workdir) || path.Clean(opts.Workdir) != opts.Workdir || opts.Workdir == "/" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, opts.Workdir, "Options.Workdir must be a clean absolute path below /")
	}
	if opts.Image == "" {
		opts.Image = DefaultImage
	}
	if opts.PullPolicy == "" {
		opts.PullPolicy = corev1.PullIfNotPresent
		if len(opts.Image) > len("corral.local/") && opts.Image[:len("corral.local/")] == "corral.local/" {
			opts.PullPolicy = corev1.PullNever
		}
	}
	switch opts.PullPolicy {
	case corev1.PullAlways, corev1.PullNever, corev1.PullIfNotPresent:
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, string(opts.PullPolicy), "Options.PullPolicy: want Always, Never or IfNotPresent")
	}
	switch opts.Mode {
	case "":
		opts.Mode = ModePods
	case ModePods, ModeSandbox:
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, string(opts.Mode), "Options.Mode: want pods or sandbox")
	}
	if opts.WarmPool < 0 || opts.WarmPool > 0 && opts.Mode != ModeSandbox {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", "Options.WarmPool: a pool size (0 or more) in Sandbox mode only")
	}
	if opts.Template != "" && opts.Mode != ModeSandbox {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, opts.Template, "Options.Template: a SandboxTemplate is for Sandbox mode only")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	res, err := resources(opts)
	if err == nil {
		err = checkShape(&opts)
	}
	if err != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, "", "%v", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, ns, err := loadConfig(opts)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, op, opts.Kubeconfig, err)
	}
	core, err := newCoreClient(cfg)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, op, opts.Kubeconfig, err)
	}
	return &Provider{opts: opts, cfg: cfg, core: core, ns: ns, resources: res, log: log,
		caps: capabilitiesOf(opts)}, nil
}

// capabilitiesOf is what the sandboxes of these options can do:
// capabilities, plus DurableFilesystem with a PersistentVolumeClaim
// workspace and NetworkPolicy when a deny is enforced by the init
// container (a NetworkPolicy alone depends on the cluster's network
// plugin, so it is not claimed).
func capabilitiesOf(opts Options) sandbox.Capabilities {
	c := capabilities()
	c.DurableFilesystem = opts.Workspace == WorkspacePVC
	c.NetworkPolicy = opts.DenyEnforcement.byInit()
	return c
}

// capabilities is what Pod sandboxes can do on any cluster with the
// default options (an emptyDir workspace, a deny enforced by the init
// container). KillableProcesses and OwnProcessTable are what sandboxtest
// measured on the real test cluster (a Pod has its own PID namespace).
func capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		NetworkPolicy:       true,
		FS:                  true,
		Exec:                true,
		Env:                 true,
		BackgroundProcesses: true,
		WritableStdin:       true,
		KillableProcesses:   true,
		OwnProcessTable:     true,
		Ports:               true,
	}
}

// loadConfig reads the client configuration and the namespace.
func loadConfig(opts Options) (*rest.Config, string, error) {
	if opts.config != nil {
		ns := opts.Namespace
		if ns == "" {
			ns = "default"
		}
		return opts.config, ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if opts.Kubeconfig != "" {
		rules.ExplicitPath = opts.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: opts.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns := opts.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	// The defaults (5 QPS, burst 10) throttle a daemon running many
	// sandboxes; the API server has its own fairness.
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, ns, nil
}

// resources builds the container's requests and limits.
func resources(opts Options) (corev1.ResourceRequirements, error) {
	r := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
	for _, q := range []struct {
		name, val, def string
		list           corev1.ResourceList
		res            corev1.ResourceName
	}{
		{"CPULimit", opts.CPULimit, DefaultCPULimit, r.Limits, corev1.ResourceCPU},
		{"MemoryLimit", opts.MemoryLimit, DefaultMemoryLimit, r.Limits, corev1.ResourceMemory},
		{"CPURequest", opts.CPURequest, DefaultCPURequest, r.Requests, corev1.ResourceCPU},
		{"MemoryRequest", opts.MemoryRequest, DefaultMemoryRequest, r.Requests, corev1.ResourceMemory},
	} {
		v := q.val
		if v == "" {
			v = q.def
		}
		if v == "0" {
			continue
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return r, fmt.Errorf("Options.%s: %v", q.name, err)
		}
		q.list[q.res] = qty
	}
	return r, nil
}

// executor returns a command executor for an exec URL: WebSocket, falling
// back to SPDY only when the upgrade itself fails (as kubectl does; a
// broader predicate would re-run a command that exited non-zero).
func (p *Provider) executor(u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(p.cfg, "GET", u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(p.cfg, "POST", u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

// Name returns "kubernetes".
func (p *Provider) Name() string { return Name }

// Capabilities returns what Pod sandboxes can do.
func (p *Provider) Capabilities() sandbox.Capabilities { return p.caps }

// Namespace returns the namespace sandboxes are made in.
func (p *Provider) Namespace() string { return p.ns }

// Host returns the API server's address.
func (p *Provider) Host() string { return p.cfg.Host }

// Ping checks that the API server answers and that the namespace exists.
func (p *Provider) Ping(ctx context.Context) error {
	if err := p.core.getNamespace(ctx, p.ns); err != nil {
		e := p.apiError("kubernetes.ping", p.ns, err)
		if sandbox.CodeOf(e) == sandbox.Unknown || sandbox.CodeOf(e) == sandbox.Internal {
			e = &sandbox.Error{Code: sandbox.Unavailable, Op: "kubernetes.ping", Msg: "no API server reachable at " + p.cfg.Host, Err: err}
		}
		return e
	}
	return nil
}

// Close stops the provider's port forwards.
func (p *Provider) Close() error {
	p.stopForwards("")
	return nil
}

// RestoreSnapshot is Unimplemented: a plain cluster has no Pod snapshots.
func (p *Provider) RestoreSnapshot(ctx context.Context, snapshot string, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "snapshots")
}

// DeleteSnapshot is Unimplemented: a plain cluster has no Pod snapshots.
func (p *Provider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	return sandbox.Unsupported(Name, "snapshots")
}

// pullPolicy reads a pull policy in any case ("never", "Never").
func pullPolicy(s string) corev1.PullPolicy {
	switch strings.ToLower(s) {
	case "always":
		return corev1.PullAlways
	case "never":
		return corev1.PullNever
	case "ifnotpresent", "missing":
		return corev1.PullIfNotPresent
	}
	return corev1.PullPolicy(s)
}
