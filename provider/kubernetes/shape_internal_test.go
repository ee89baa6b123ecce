package kubernetes

import (
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/d10ffeed/corral/sandbox"
)

// testProvider is a provider on an unreachable cluster, for building
// specs.
func testProvider(t *testing.T, o Options) *Provider {
	t.Helper()
	o.config = &rest.Config{Host: "https://127.0.0.1:1"}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var testTols = []corev1.Toleration{{Key: "sandbox", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}}

// TestPodShapeOptions: tolerations, pull secrets and annotations reach
// the Pod; a denied network adds the init container with only NET_ADMIN
// and a sandbox container without it; a pvc workspace mounts the claim.
func TestPodShapeOptions(t *testing.T) {
	p := testProvider(t, Options{Tolerations: testTols, ImagePullSecrets: []string{"regcred"},
		Annotations: map[string]string{"team": "a"}})
	for _, deny := range []bool{false, true} {
		opts := sandbox.CreateOptions{ID: "k"}
		if deny {
			opts.Network = sandbox.NetworkDeny
		}
		lbl, ann, err := p.sandboxMeta("box", opts)
		if err != nil {
			t.Fatal(err)
		}
		pod := p.newPod("box", lbl, ann)
		if !slices.Equal(pod.Spec.Tolerations, testTols) {
			t.Errorf("tolerations %v", pod.Spec.Tolerations)
		}
		if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "regcred" {
			t.Errorf("image pull secrets %v", pod.Spec.ImagePullSecrets)
		}
		if pod.Annotations["team"] != "a" || pod.Annotations[AnnotationKey] != "k" {
			t.Errorf("annotations %v", pod.Annotations)
		}
		if got := denied(pod); got != deny {
			t.Errorf("deny %v: the pod's network label says %v", deny, got)
		}
		if !deny {
			if len(pod.Spec.InitContainers) != 0 || pod.Spec.Containers[0].SecurityContext.Capabilities != nil {
				t.Errorf("an allowed pod has %v and %v", pod.Spec.InitContainers, pod.Spec.Containers[0].SecurityContext.Capabilities)
			}
			continue
		}
		if len(pod.Spec.InitContainers) != 1 {
			t.Fatalf("init containers %v", pod.Spec.InitContainers)
		}
		caps := pod.Spec.InitContainers[0].SecurityContext.Capabilities
		if !slices.Equal(caps.Add, []corev1.Capability{"NET_ADMIN"}) || !slices.Equal(caps.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("init capabilities %+v", caps)
		}
		if c := pod.Spec.Containers[0].SecurityContext.Capabilities; c == nil || !slices.Contains(c.Drop, "NET_ADMIN") {
			t.Errorf("the sandbox container keeps NET_ADMIN: %+v", c)
		}
		np := p.denyPolicy("box", pod)
		if np.Spec.PodSelector.MatchLabels[LabelSandboxID] != "box" || len(np.Spec.PolicyTypes) != 2 ||
			len(np.Spec.Ingress)+len(np.Spec.Egress) != 0 || np.Annotations["team"] != "a" {
			t.Errorf("deny policy %+v", np)
		}
	}
	pv := testProvider(t, Options{Workspace: WorkspacePVC, StorageClass: "local"})
	pod := pv.newPod("box", map[string]string{}, nil)
	if c := pod.Spec.Volumes[0].PersistentVolumeClaim; c == nil || c.ClaimName != "box-workspace" {
		t.Errorf("pvc workspace volume %+v", pod.Spec.Volumes[0])
	}
	if !pv.Capabilities().DurableFilesystem || p.Capabilities().DurableFilesystem {
		t.Errorf("durableFilesystem: pvc %v, emptyDir %v", pv.Capabilities().DurableFilesystem, p.Capabilities().DurableFilesystem)
	}
	if !p.Capabilities().NetworkPolicy || testProvider(t, Options{DenyEnforcement: DenyNetworkPolicy}).Capabilities().NetworkPolicy {
		t.Errorf("networkPolicy is claimed only with the init container")
	}
	if testProvider(t, Options{DenyEnforcement: DenyNetworkPolicy}).sandboxPodSpec(true).InitContainers != nil {
		t.Errorf("networkpolicy enforcement adds an init container")
	}
}

// TestShapeOptionsChecked: bad shape options are InvalidArgument.
func TestShapeOptionsChecked(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"workspace", Options{Workspace: "nfs"}},
		{"pvc in sandbox mode", Options{Workspace: WorkspacePVC, Mode: ModeSandbox}},
		{"storage class without pvc", Options{StorageClass: "x"}},
		{"size", Options{Workspace: WorkspacePVC, WorkspaceSize: "lots"}},
		{"ports", Options{Ports: "nodeport"}},
		{"deny", Options{DenyEnforcement: "iptables"}},
		{"pull secret", Options{ImagePullSecrets: []string{"Bad_Name"}}},
		{"toleration operator", Options{Tolerations: []corev1.Toleration{{Key: "a", Operator: "In"}}}},
		{"toleration exists with value", Options{Tolerations: []corev1.Toleration{{Key: "a", Operator: corev1.TolerationOpExists, Value: "x"}}}},
		{"toleration seconds", Options{Tolerations: []corev1.Toleration{{Key: "a", TolerationSeconds: new(int64)}}}},
		{"annotation prefix", Options{Annotations: map[string]string{"corral.dev/x": "y"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.config = &rest.Config{Host: "https://127.0.0.1:1"}
			if _, err := New(c.opts); sandbox.CodeOf(err) != sandbox.InvalidArgument {
				t.Fatalf("New: %v, want InvalidArgument", err)
			}
		})
	}
}

// TestTemplateNameFollowsShape: the SandboxTemplate's name changes with
// every shape option and with the network denied.
func TestTemplateNameFollowsShape(t *testing.T) {
	name := func(o Options, deny bool) string {
		t.Helper()
		o.Mode = ModeSandbox
		n, pt, err := testProvider(t, o).templateName(deny)
		if err != nil {
			t.Fatal(err)
		}
		if deny != (len(pt.Spec.InitContainers) == 1) {
			t.Errorf("deny %v: template init containers %v", deny, pt.Spec.InitContainers)
		}
		return n
	}
	base := name(Options{}, false)
	seen := map[string]string{base: "base"}
	for what, n := range map[string]string{
		"deny":        name(Options{}, true),
		"tolerations": name(Options{Tolerations: testTols}, false),
		"pullSecrets": name(Options{ImagePullSecrets: []string{"regcred"}}, false),
		"annotations": name(Options{Annotations: map[string]string{"team": "a"}}, false),
	} {
		if prev, ok := seen[n]; ok {
			t.Errorf("%s and %s name the same template %s", what, prev, n)
		}
		seen[n] = what
	}
	o := Options{Mode: ModeSandbox, Template: "theirs"}
	if _, _, err := testProvider(t, o).templateName(true); err == nil {
		t.Errorf("a deny with the init container on a template corral did not make: no error")
	}
	o.DenyEnforcement = DenyNetworkPolicy
	if n, _, err := testProvider(t, o).templateName(true); err != nil || n != "theirs" {
		t.Errorf("networkpolicy deny on their template: %q, %v", n, err)
	}
}

// TestSectionDecode: the corral.yaml section takes the shape options and
// names the line of a mistake.
func TestSectionDecode(t *testing.T) {
	for _, c := range []struct{ name, yaml, err string }{
		{"ok", "tolerations:\n  - {key: a, operator: Exists, effect: NoSchedule}\nimagePullSecrets: [regcred]\nannotations: {team: a}\nworkspace: pvc\nstorageClass: local\nworkspaceSize: 2Gi\nports: service\ndenyEnforcement: init\n", ""},
		{"unknown key", "image: x\ntolerance: []\n", `line 2: provider.kubernetes: unknown key "tolerance"`},
		{"unknown toleration key", "tolerations:\n  - key: a\n    efect: NoSchedule\n", `line 3: provider.kubernetes.tolerations[0]: unknown key "efect"`},
		{"bad toleration", "tolerations:\n  - key: a\n  - {key: b, operator: Exists, value: c}\n", "line 3: provider.kubernetes.tolerations[1]: operator Exists takes no value"},
		{"bad workspace", "workspace: nfs\n", `line 1: provider.kubernetes.workspace: "nfs": want emptyDir, pvc`},
		{"bad ports", "\nports: nodeport\n", `line 2: provider.kubernetes.ports: "nodeport"`},
		{"bad deny", "denyEnforcement: iptables\n", `line 1: provider.kubernetes.denyEnforcement: "iptables"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(c.yaml), &doc); err != nil {
				t.Fatal(err)
			}
			s, err := decodeSection(doc.Content[0])
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(s.Tolerations) != 1 || s.Tolerations[0].toleration().Operator != corev1.TolerationOpExists ||
					s.ImagePullSecrets[0] != "regcred" || s.Annotations["team"] != "a" || s.Workspace != "pvc" ||
					s.Ports != "service" || s.DenyEnforcement != "init" || s.WorkspaceSize != "2Gi" {
					t.Errorf("section %+v", s)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want %q", err, c.err)
			}
		})
	}
}
