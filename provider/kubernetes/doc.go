// Package kubernetes is corral's Kubernetes provider: a sandbox is a Pod
// on a cluster the user already runs, reached through the API server with
// the official client (k8s.io/client-go).
//
// Each sandbox is one Pod in Options.Namespace, named after the requested
// sandbox id (shortened with a digest when the id is not a valid Pod
// name), labelled as corral's (LabelManaged, LabelSandboxID, LabelKeyHash)
// and annotated with the key as given. Its one container runs
// Options.Image with a keep-alive main process, the workspace on an
// emptyDir volume at Options.Workdir, resource requests and limits, no
// service-account token and no privilege escalation.
//
// Commands run through the API server's exec subresource (WebSocket, with
// a fall back to SPDY when the upgrade is refused) on the provider kit's
// process layer (sandbox/execproc): the group kill reaches every process a
// command started, and the pod's own PID namespace is the sandbox's
// process table. The exec API has no environment or working directory, so
// every command starts under a small launcher: the directory is an
// argument, and the environment (which carries secrets) travels as a
// prelude on standard input, never in argv, the Pod spec or a Kubernetes
// object. Files go through the kit's exec file system (sandbox/execfs).
//
// Ports go through the API server's port-forward subresource: ConnectPort
// answers on a loopback listener and opens one port-forward session per
// connection (see ports.go).
//
// In Sandbox mode (Options.Mode ModeSandbox) a sandbox is an agent-sandbox
// SandboxClaim of corral's SandboxTemplate, served from a SandboxWarmPool
// when one has a pod ready (see agentsandbox.go); everything else is as
// above, on the claim's Pod.
//
// The provider talks to the API server with a core/v1 REST client, not
// client-go's full clientset, which would register every API group at
// start-up (see client.go).
//
// What a plain cluster does not give is not claimed: no snapshots or
// forks, no network gate (a NetworkPolicy's enforcement depends on the
// cluster's network plugin). For the same reason an egress allow-list is
// refused unless Options.EgressPolicy is networkpolicy (the user trusts
// their plugin); then its IP entries become a NetworkPolicy of ipBlocks
// and a host name is refused (see egress.go).
package kubernetes
