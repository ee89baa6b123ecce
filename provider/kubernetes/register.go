package kubernetes

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

func init() {
	registry.Register(registry.Entry{
		Name:         Name,
		Summary:      "Pods on a Kubernetes cluster (exec through the API server)",
		Capabilities: capabilities,
		Limits: func() registry.Limits {
			return registry.Limits{Enforced: true,
				Text: "cpu " + DefaultCPULimit + ", memory " + DefaultMemoryLimit + " (requests cpu " + DefaultCPURequest + ", memory " + DefaultMemoryRequest + ")",
				Note: "change with corral.yaml provider.kubernetes cpuLimit, memoryLimit, cpuRequest, memoryRequest (\"0\" unsets one)"}
		},
		Section: func(n *yaml.Node) (registry.Config, error) {
			return decodeSection(n)
		},
		Flags: []registry.Flag{
			{Name: "kubeconfig", Usage: "kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster)"},
			{Name: "context", Usage: "kubeconfig context (default: its current context)"},
			{Name: "namespace", Usage: "namespace of the sandbox pods (default: the context's, else default)"},
			{Name: "image", Usage: "image the sandbox pods run (default " + DefaultImage + ")"},
			{Name: "k8s-mode", Usage: "pods (default: a Pod per sandbox) or sandbox (a SandboxClaim per sandbox, agent-sandbox)"},
			{Name: "k8s-workspace", Usage: "emptyDir (default) or pvc (a PersistentVolumeClaim per sandbox: files outlive the Pod; pods mode)"},
			{Name: "k8s-ports", Usage: "portforward (default: through the API server) or service (a ClusterIP Service per port)"},
			{Name: "k8s-egress", Usage: "networkpolicy: enforce an egress allow-list of IP addresses with a NetworkPolicy, trusting the network plugin (default: refuse allow-lists)"},
			{Name: "k8s-deny", Usage: "how a denied network is enforced: both (default), init (an init container takes the interfaces down; needs NET_ADMIN) or networkpolicy (up to the network plugin)"},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			return New(Options{Kubeconfig: v["kubeconfig"], Context: v["context"], Namespace: v["namespace"],
				Image: v["image"], Mode: Mode(v["k8s-mode"]), Workspace: Workspace(v["k8s-workspace"]),
				Ports: PortsMode(v["k8s-ports"]), DenyEnforcement: DenyEnforcement(v["k8s-deny"]),
				EgressPolicy: EgressPolicy(v["k8s-egress"]), Logger: o.Logger})
		},
	})
}

// Section is corral.yaml's provider.kubernetes section:
//
//	provider:
//	  name: kubernetes
//	  kubernetes: {kubeconfig: ~/.kube/config, namespace: agents, image: node:22}
//
// mode: sandbox (with template and warmPool) makes sandboxes through
// agent-sandbox's SandboxClaims instead of plain Pods. tolerations are
// Pod-spec tolerations ({key, operator, value, effect,
// tolerationSeconds}); imagePullSecrets names existing Secrets;
// annotations go on every object corral creates; workspace: pvc (with
// storageClass, workspaceSize) keeps the files in a PersistentVolumeClaim;
// ports: service exposes ports as ClusterIP Services; denyEnforcement is
// both, init or networkpolicy.
//
// Every key is optional (see Options for the defaults).
type Section struct {
	Kubeconfig       string            `yaml:"kubeconfig"`
	Context          string            `yaml:"context"`
	Namespace        string            `yaml:"namespace"`
	Image            string            `yaml:"image"`
	PullPolicy       string            `yaml:"pullPolicy"`
	Workdir          string            `yaml:"workdir"`
	CPULimit         string            `yaml:"cpuLimit"`
	MemoryLimit      string            `yaml:"memoryLimit"`
	CPURequest       string            `yaml:"cpuRequest"`
	MemoryRequest    string            `yaml:"memoryRequest"`
	RuntimeClassName string            `yaml:"runtimeClassName"`
	ServiceAccount   string            `yaml:"serviceAccount"`
	NodeSelector     map[string]string `yaml:"nodeSelector"`
	Tolerations      []Toleration      `yaml:"tolerations"`
	ImagePullSecrets []string          `yaml:"imagePullSecrets"`
	Labels           map[string]string `yaml:"labels"`
	Annotations      map[string]string `yaml:"annotations"`
	Mode             string            `yaml:"mode"`
	Template         string            `yaml:"template"`
	WarmPool         int32             `yaml:"warmPool"`
	Workspace        string            `yaml:"workspace"`
	StorageClass     string            `yaml:"storageClass"`
	WorkspaceSize    string            `yaml:"workspaceSize"`
	Ports            string            `yaml:"ports"`
	DenyEnforcement  string            `yaml:"denyEnforcement"`
	EgressPolicy     string            `yaml:"egressPolicy"`
}

// Toleration is one entry of the section's tolerations, as in a Pod spec.
type Toleration struct {
	Key               string `yaml:"key"`
	Operator          string `yaml:"operator"`
	Value             string `yaml:"value"`
	Effect            string `yaml:"effect"`
	TolerationSeconds *int64 `yaml:"tolerationSeconds"`
}

// toleration is the Pod spec's form of t.
func (t Toleration) toleration() corev1.Toleration {
	return corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value,
		Effect: corev1.TaintEffect(t.Effect), TolerationSeconds: t.TolerationSeconds}
}

// decodeSection decodes the section strictly: an unknown key (in it or in
// a toleration), a toleration the API server would refuse, or an unknown
// workspace, ports or denyEnforcement value is an error naming its line.
func decodeSection(n *yaml.Node) (*Section, error) {
	var s Section
	if err := registry.Decode(n, "provider.kubernetes", &s); err != nil {
		return nil, err
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return &s, nil
	}
	enums := map[string][]string{
		"workspace":       {string(WorkspaceEmptyDir), string(WorkspacePVC)},
		"ports":           {string(PortsForward), string(PortsService)},
		"denyEnforcement": {string(DenyBoth), string(DenyInit), string(DenyNetworkPolicy)},
		"mode":            {string(ModePods), string(ModeSandbox)},
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if want, ok := enums[k.Value]; ok && !slices.Contains(want, v.Value) {
			return nil, fmt.Errorf("line %d: provider.kubernetes.%s: %q: want %s", v.Line, k.Value, v.Value, strings.Join(want, ", "))
		}
		if k.Value != "tolerations" || v.Kind != yaml.SequenceNode {
			continue
		}
		for j, item := range v.Content {
			sec := fmt.Sprintf("provider.kubernetes.tolerations[%d]", j)
			var t Toleration
			if err := registry.Decode(item, sec, &t); err != nil {
				return nil, err
			}
			if err := checkToleration(t.toleration()); err != nil {
				return nil, fmt.Errorf("line %d: %s: %v", item.Line, sec, err)
			}
		}
	}
	return &s, nil
}

// Provider builds the kubernetes provider the section describes; the
// kubeconfig path is relative to the config file.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	kc := s.Kubeconfig
	if kc != "" {
		kc = o.RelPath(kc)
	}
	var tols []corev1.Toleration
	for _, t := range s.Tolerations {
		tols = append(tols, t.toleration())
	}
	return New(Options{
		Kubeconfig: kc, Context: s.Context, Namespace: s.Namespace, Image: s.Image,
		PullPolicy: pullPolicy(s.PullPolicy), Workdir: s.Workdir,
		CPULimit: s.CPULimit, MemoryLimit: s.MemoryLimit, CPURequest: s.CPURequest, MemoryRequest: s.MemoryRequest,
		RuntimeClassName: s.RuntimeClassName, ServiceAccount: s.ServiceAccount,
		NodeSelector: s.NodeSelector, Tolerations: tols, ImagePullSecrets: s.ImagePullSecrets,
		Labels: s.Labels, Annotations: s.Annotations, Mode: Mode(s.Mode), Template: s.Template, WarmPool: s.WarmPool,
		Workspace: Workspace(s.Workspace), StorageClass: s.StorageClass, WorkspaceSize: s.WorkspaceSize,
		Ports: PortsMode(s.Ports), DenyEnforcement: DenyEnforcement(s.DenyEnforcement),
		EgressPolicy: EgressPolicy(s.EgressPolicy),
		Logger:       o.Logger,
	})
}
