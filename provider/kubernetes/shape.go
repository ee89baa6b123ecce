package kubernetes

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The options that shape a sandbox's Pod beyond its container: where it
// may run (tolerations), what it pulls with (image pull secrets), what
// corral writes on its objects (annotations), its workspace volume, how
// its ports are reached and how a network deny is enforced.

// Workspace is the kind of volume mounted at Options.Workdir.
type Workspace string

// The workspaces.
const (
	// WorkspaceEmptyDir is an emptyDir volume: the files go with the Pod.
	WorkspaceEmptyDir Workspace = "emptyDir"
	// WorkspacePVC is a PersistentVolumeClaim per sandbox: the files
	// outlive the Pod (Capabilities.DurableFilesystem).
	WorkspacePVC Workspace = "pvc"
)

// DefaultWorkspaceSize is the size a workspace claim asks for when
// Options.WorkspaceSize is empty.
const DefaultWorkspaceSize = "1Gi"

// PortsMode is how ConnectPort reaches a sandbox's port.
type PortsMode string

// The port modes.
const (
	// PortsForward forwards a listener on 127.0.0.1 through the API
	// server's port-forward subresource (works from anywhere the API
	// server is reachable).
	PortsForward PortsMode = "portforward"
	// PortsService makes a ClusterIP Service per port and returns its
	// cluster address (reachable from the cluster's network).
	PortsService PortsMode = "service"
)

// DenyEnforcement is how a sandbox created with sandbox.NetworkDeny is cut
// off from the network.
type DenyEnforcement string

// The deny enforcements.
const (
	// DenyNetworkPolicy makes a NetworkPolicy with no ingress or egress
	// rules that selects the sandbox's Pod. Whether it is enforced is up
	// to the cluster's network plugin (plain bridge CNI does not), so the
	// provider does not claim Capabilities.NetworkPolicy with it alone.
	DenyNetworkPolicy DenyEnforcement = "networkpolicy"
	// DenyInit runs an init container with only NET_ADMIN that takes the
	// Pod's interfaces other than loopback down and flushes their
	// addresses before the sandbox container starts; the sandbox container
	// has no NET_ADMIN and cannot undo it. The namespace's Pod Security
	// level must allow NET_ADMIN (privileged; baseline and restricted
	// refuse the Pod).
	DenyInit DenyEnforcement = "init"
	// DenyBoth is DenyInit and DenyNetworkPolicy (the default).
	DenyBoth DenyEnforcement = "both"
)

// byInit reports whether the init container is part of the enforcement.
func (d DenyEnforcement) byInit() bool { return d == DenyInit || d == DenyBoth || d == "" }

// byPolicy reports whether a NetworkPolicy is part of the enforcement.
func (d DenyEnforcement) byPolicy() bool { return d == DenyNetworkPolicy || d == DenyBoth || d == "" }

// denyInitName is the name of the init container that cuts the network.
const denyInitName = "corral-network-deny"

// denyScript takes every interface but loopback down, flushes its
// addresses (their routes go with them), and fails unless all are down.
const denyScript = `set -e
for d in /sys/class/net/*; do
  n=${d##*/}
  [ "$n" = lo ] && continue
  ip addr flush dev "$n"
  ip link set dev "$n" down
done
for d in /sys/class/net/*; do
  n=${d##*/}
  [ "$n" = lo ] && continue
  [ "$(cat "$d/operstate")" = down ] || { echo "corral: $n is still up" >&2; exit 1; }
done`

// LabelNetwork is "deny" on a Pod whose network is denied.
const LabelNetwork = "corral.dev/network"

// checkShape checks and defaults the shape options.
func checkShape(opts *Options) error {
	switch opts.Workspace {
	case "":
		opts.Workspace = WorkspaceEmptyDir
	case WorkspaceEmptyDir, WorkspacePVC:
	default:
		return fmt.Errorf("Options.Workspace %q: want emptyDir or pvc", opts.Workspace)
	}
	if opts.Workspace == WorkspacePVC && opts.Mode == ModeSandbox {
		return fmt.Errorf("Options.Workspace pvc: a workspace claim per sandbox is for Pods mode only (a SandboxTemplate is shared by its claims)")
	}
	if opts.Workspace != WorkspacePVC && (opts.StorageClass != "" || opts.WorkspaceSize != "") {
		return fmt.Errorf("Options.StorageClass and WorkspaceSize: for Workspace pvc only")
	}
	if opts.WorkspaceSize == "" {
		opts.WorkspaceSize = DefaultWorkspaceSize
	}
	if q, err := resource.ParseQuantity(opts.WorkspaceSize); err != nil || q.Sign() <= 0 {
		return fmt.Errorf("Options.WorkspaceSize %q: want a positive quantity (\"1Gi\")", opts.WorkspaceSize)
	}
	switch opts.Ports {
	case "":
		opts.Ports = PortsForward
	case PortsForward, PortsService:
	default:
		return fmt.Errorf("Options.Ports %q: want portforward or service", opts.Ports)
	}
	switch opts.DenyEnforcement {
	case "":
		opts.DenyEnforcement = DenyBoth
	case DenyNetworkPolicy, DenyInit, DenyBoth:
	default:
		return fmt.Errorf("Options.DenyEnforcement %q: want networkpolicy, init or both", opts.DenyEnforcement)
	}
	if opts.EgressPolicy != EgressRefuse && opts.EgressPolicy != EgressNetworkPolicy {
		return fmt.Errorf("Options.EgressPolicy %q: want networkpolicy or empty (refuse allow-lists)", opts.EgressPolicy)
	}
	for _, s := range opts.ImagePullSecrets {
		if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
			return fmt.Errorf("Options.ImagePullSecrets %q: %s", s, strings.Join(errs, "; "))
		}
	}
	for i, t := range opts.Tolerations {
		if err := checkToleration(t); err != nil {
			return fmt.Errorf("Options.Tolerations[%d]: %v", i, err)
		}
	}
	for k := range opts.Annotations {
		if strings.HasPrefix(k, "corral.dev/") {
			return fmt.Errorf("annotation %q: the corral.dev/ prefix is corral's own", k)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("annotation key %q: %s", k, strings.Join(errs, "; "))
		}
	}
	return nil
}

// checkToleration checks one toleration as the API server would.
func checkToleration(t corev1.Toleration) error {
	if t.Key != "" {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("key %q: %s", t.Key, strings.Join(errs, "; "))
		}
	}
	switch t.Operator {
	case "", corev1.TolerationOpEqual:
		if t.Key == "" && t.Value != "" {
			return fmt.Errorf("a value needs a key")
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			return fmt.Errorf("operator Exists takes no value")
		}
	default:
		return fmt.Errorf("operator %q: want Equal or Exists", t.Operator)
	}
	switch t.Effect {
	case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		return fmt.Errorf("tolerationSeconds is for effect NoExecute only")
	}
	return nil
}

// annotations merges Options.Annotations and corral's own (which win).
func (p *Provider) annotations(own map[string]string) map[string]string {
	out := make(map[string]string, len(p.opts.Annotations)+len(own))
	for k, v := range p.opts.Annotations {
		out[k] = v
	}
	for k, v := range own {
		out[k] = v
	}
	return out
}

// shapePod adds the shape options to a sandbox's Pod spec: tolerations,
// image pull secrets, and for a denied network the init container that
// cuts it (and a sandbox container that may not restore it).
func (p *Provider) shapePod(spec *corev1.PodSpec, deny bool) {
	spec.Tolerations = p.opts.Tolerations
	for _, s := range p.opts.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if !deny {
		return
	}
	main := &spec.Containers[0]
	main.SecurityContext.Capabilities = &corev1.Capabilities{Drop: []corev1.Capability{"NET_ADMIN"}}
	if !p.opts.DenyEnforcement.byInit() {
		return
	}
	no := false
	var root int64
	spec.InitContainers = []corev1.Container{{
		Name:            denyInitName,
		Image:           p.opts.Image,
		ImagePullPolicy: p.opts.PullPolicy,
		Command:         []string{"sh", "-c", denyScript},
		Resources:       p.resources,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no,
			RunAsUser:                &root,
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
		},
	}}
}
