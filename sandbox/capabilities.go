package sandbox

import "fmt"

// Capabilities says what a provider's sandboxes can do. Callers branch on
// these flags, never on a provider's name.
//
// KillableProcesses in particular is measured, not asserted: the
// conformance suite in sandboxtest kills a process tree with a backgrounded
// grandchild and proves that it stops. A provider must not claim it without
// passing that case.
type Capabilities struct {
	// FS is true when Handle.FS works. Mandatory.
	FS bool `json:"fs"`
	// Exec is true when Handle.Exec and Handle.Spawn work. Mandatory.
	Exec bool `json:"exec"`
	// Env is true when create-time and per-command environment and
	// Handle.SetEnv work.
	Env bool `json:"env"`
	// Ports is true when Handle.ConnectPort returns a reachable endpoint.
	Ports bool `json:"ports"`
	// BackgroundProcesses is true when a spawned process may outlive the
	// call that started it.
	BackgroundProcesses bool `json:"backgroundProcesses"`
	// WritableStdin is true when a spawned process has a stdin the host can
	// write to and close.
	WritableStdin bool `json:"writableStdin"`
	// KillableProcesses is true when Process.Kill and cancelling the spawn
	// context really terminate the process and every process it started.
	KillableProcesses bool `json:"killableProcesses"`
	// Snapshots is true when Handle.Snapshot and Provider.RestoreSnapshot
	// work.
	Snapshots bool `json:"snapshots"`
	// NetworkPolicy is true when the provider enforces the network gate of
	// CreateOptions.Network at create.
	NetworkPolicy bool `json:"networkPolicy"`
	// DurableFilesystem is true when the sandbox's files survive a stop and
	// start without a snapshot.
	DurableFilesystem bool `json:"durableFilesystem"`
	// Fork is true when Handle.Fork works.
	Fork bool `json:"fork"`
	// OwnProcessTable is true when the sandbox has a process table of its
	// own (a PID namespace, a VM): every process in it belongs to the
	// sandbox, so a process that a run left behind and that was re-parented
	// to the sandbox's init can be found and killed. Never true for host
	// processes. The conformance suite checks that a host process is not
	// visible from inside.
	OwnProcessTable bool `json:"ownProcessTable"`
}

// CapabilityNames lists the flag names of Capabilities in a fixed order, as
// they appear in JSON and in UnsupportedCapabilityError.
var CapabilityNames = []string{
	"fs", "exec", "env", "ports", "backgroundProcesses", "writableStdin",
	"killableProcesses", "snapshots", "networkPolicy", "durableFilesystem", "fork", "ownProcessTable",
}

// Has reports the flag with the given name (one of CapabilityNames). An
// unknown name reports false.
func (c Capabilities) Has(name string) bool {
	switch name {
	case "fs":
		return c.FS
	case "exec":
		return c.Exec
	case "env":
		return c.Env
	case "ports":
		return c.Ports
	case "backgroundProcesses":
		return c.BackgroundProcesses
	case "writableStdin":
		return c.WritableStdin
	case "killableProcesses":
		return c.KillableProcesses
	case "snapshots":
		return c.Snapshots
	case "networkPolicy":
		return c.NetworkPolicy
	case "durableFilesystem":
		return c.DurableFilesystem
	case "fork":
		return c.Fork
	case "ownProcessTable":
		return c.OwnProcessTable
	}
	return false
}

// String lists the flags that are true, in CapabilityNames order.
func (c Capabilities) String() string {
	var on []string
	for _, n := range CapabilityNames {
		if c.Has(n) {
			on = append(on, n)
		}
	}
	return fmt.Sprint(on)
}
