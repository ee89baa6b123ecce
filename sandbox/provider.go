package sandbox

import (
	"context"
	"time"
)

// Provider creates, resumes and destroys sandboxes on one backend.
//
// Implementations must be safe for concurrent use.
type Provider interface {
	// Name is the provider's stable name, e.g. "local" or "docker". It is part
	// of sandbox keys and instance records.
	Name() string

	// Capabilities returns what this provider's sandboxes can do. It is
	// static for the provider's lifetime.
	Capabilities() Capabilities

	// Create makes and starts a new sandbox.
	Create(ctx context.Context, opts CreateOptions) (Handle, error)

	// Resume reconnects to an existing sandbox by its id, starting it if it
	// was stopped. A sandbox that is gone is reported as an error with code
	// NotFound, never as a handle that fails later.
	Resume(ctx context.Context, id string) (Handle, error)

	// RestoreSnapshot creates a new sandbox from a snapshot taken with
	// Handle.Snapshot. Providers without Capabilities().Snapshots return an
	// UnsupportedCapabilityError.
	RestoreSnapshot(ctx context.Context, snapshot string, opts CreateOptions) (Handle, error)

	// DeleteSnapshot removes a snapshot taken with Handle.Snapshot.
	// Deleting a snapshot that is gone succeeds; one that a live sandbox
	// still uses may be refused with FailedPrecondition. Providers without
	// Capabilities().Snapshots return an UnsupportedCapabilityError.
	DeleteSnapshot(ctx context.Context, snapshot string) error

	// Destroy removes the sandbox with the given id and kills everything
	// running in it. Destroying a sandbox that is already gone succeeds.
	Destroy(ctx context.Context, id string) error
}

// NetworkMode is the coarse network gate handed to a provider at create.
type NetworkMode string

// Network gates. The empty value means the provider's default (allowed).
const (
	NetworkDefault NetworkMode = ""
	NetworkAllow   NetworkMode = "allow"
	NetworkDeny    NetworkMode = "deny"
)

// CreateOptions are the inputs to Provider.Create and
// Provider.RestoreSnapshot. Every field is optional.
type CreateOptions struct {
	// ID is the requested identity, usually the sandbox key. Providers whose
	// sandboxes can be named use it (so Resume can find the sandbox by it);
	// others may ignore it. Handle.ID is the id to resume with either way.
	ID string

	// Env is set in every command the sandbox runs. It usually carries
	// resolved secrets, so providers must keep it out of anything persisted
	// (container configuration, images, snapshots, logs) and re-apply it
	// per command instead.
	Env map[string]string

	// Network is the network gate. Providers with
	// Capabilities().NetworkPolicy enforce NetworkDeny; others ignore it.
	Network NetworkMode
	// Egress is the egress allow-list (Policy.Egress): a provider that is
	// an EgressEnforcer puts the sandbox where its only way out is the
	// egress gateway; the run's agent gets the gateway as its proxy.
	Egress []string

	// Labels are extra metadata attached to the sandbox where the backend
	// supports labels (never secrets).
	Labels map[string]string

	// SourceDir, when set, is a host directory whose contents the provider
	// copies into the workspace root at create.
	SourceDir string
}

// Handle is one live sandbox. Implementations must be safe for concurrent
// use: many commands may run on one handle at once.
type Handle interface {
	// ID is the id Provider.Resume and Provider.Destroy take.
	ID() string

	// Provider is the name of the provider that made this sandbox.
	Provider() string

	// WorkspaceRoot is the real path, inside the sandbox, behind the
	// portable root "/workspace" (equal to WorkspaceRoot on most remote
	// providers; a host directory for the local provider).
	WorkspaceRoot() string

	// Capabilities returns what this sandbox can do.
	Capabilities() Capabilities

	// FS is the sandbox's file system, rooted at the workspace.
	FS() FS

	// Exec runs a command to completion and returns its output and exit
	// code. A non-zero exit is a result, not an error; an error means the
	// command could not be run or the transport failed, or ctx (or
	// Command.Timeout) ended it, in which case the command is killed where
	// the provider can kill.
	Exec(ctx context.Context, cmd Command) (*ExecResult, error)

	// Spawn starts a command and returns at once. Cancelling ctx kills the
	// process on providers with Capabilities().KillableProcesses.
	Spawn(ctx context.Context, cmd Command) (Process, error)

	// ConnectPort returns how the host reaches a port the sandbox listens
	// on. Providers without Capabilities().Ports return an
	// UnsupportedCapabilityError.
	ConnectPort(ctx context.Context, port int) (Endpoint, error)

	// SetEnv merges vars into the environment of every later command. It is
	// how secrets come back after a resume or restore.
	SetEnv(ctx context.Context, vars map[string]string) error

	// Snapshot captures the sandbox so Provider.RestoreSnapshot can recreate
	// it. Providers without Capabilities().Snapshots return an
	// UnsupportedCapabilityError.
	Snapshot(ctx context.Context, label string) (Snapshot, error)

	// Fork creates an independent copy of the sandbox. Providers without
	// Capabilities().Fork return an UnsupportedCapabilityError.
	Fork(ctx context.Context) (Handle, error)

	// Destroy kills everything running in the sandbox and removes it.
	// Destroying twice succeeds.
	Destroy(ctx context.Context) error
}

// Endpoint is how the host reaches a port inside a sandbox.
type Endpoint struct {
	URL     string            `json:"url"`
	Token   string            `json:"token,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Snapshot identifies a captured sandbox state.
type Snapshot struct {
	ID        string    `json:"id"`              // what RestoreSnapshot takes
	Label     string    `json:"label,omitempty"` // the label given to Snapshot
	SandboxID string    `json:"sandboxId"`       // the sandbox it was taken from
	CreatedAt time.Time `json:"createdAt"`
}
