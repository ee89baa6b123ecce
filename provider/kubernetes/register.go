package kubernetes

import (
	"gopkg.in/yaml.v3"

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
			var s Section
			if err := registry.Decode(n, "provider.kubernetes", &s); err != nil {
				return nil, err
			}
			return &s, nil
		},
		Flags: []registry.Flag{
			{Name: "kubeconfig", Usage: "kubeconfig file (default: KUBECONFIG, ~/.kube/config, else in-cluster)"},
			{Name: "context", Usage: "kubeconfig context (default: its current context)"},
			{Name: "namespace", Usage: "namespace of the sandbox pods (default: the context's, else default)"},
			{Name: "image", Usage: "image the sandbox pods run (default " + DefaultImage + ")"},
			{Name: "k8s-mode", Usage: "pods (default: a Pod per sandbox) or sandbox (a SandboxClaim per sandbox, agent-sandbox)"},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			return New(Options{Kubeconfig: v["kubeconfig"], Context: v["context"], Namespace: v["namespace"],
				Image: v["image"], Mode: Mode(v["k8s-mode"]), Logger: o.Logger})
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
// agent-sandbox's SandboxClaims instead of plain Pods.
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
	Labels           map[string]string `yaml:"labels"`
	Mode             string            `yaml:"mode"`
	Template         string            `yaml:"template"`
	WarmPool         int32             `yaml:"warmPool"`
}

// Provider builds the kubernetes provider the section describes; the
// kubeconfig path is relative to the config file.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	kc := s.Kubeconfig
	if kc != "" {
		kc = o.RelPath(kc)
	}
	return New(Options{
		Kubeconfig: kc, Context: s.Context, Namespace: s.Namespace, Image: s.Image,
		PullPolicy: pullPolicy(s.PullPolicy), Workdir: s.Workdir,
		CPULimit: s.CPULimit, MemoryLimit: s.MemoryLimit, CPURequest: s.CPURequest, MemoryRequest: s.MemoryRequest,
		RuntimeClassName: s.RuntimeClassName, ServiceAccount: s.ServiceAccount,
		NodeSelector: s.NodeSelector, Labels: s.Labels, Mode: Mode(s.Mode), Template: s.Template, WarmPool: s.WarmPool,
		Logger: o.Logger,
	})
}
