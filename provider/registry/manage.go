package registry

import (
	"context"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Sandbox is one of corral's sandboxes as a Lister reports it.
type Sandbox struct {
	// ID is the sandbox id Resume and Destroy take.
	ID string `json:"id"`
	// Key is the instance key corral gave it, if any.
	Key string `json:"key,omitempty"`
	// Image is what it was made from (an image, a template), if any.
	Image string `json:"image,omitempty"`
	// State is the backend's word for it (running, exited, ...).
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	// Detail is anything else the provider reports (its own record).
	Detail any `json:"detail,omitempty"`
}

// Lister lists corral's sandboxes on a backend (never what corral did not
// make), newest first.
type Lister interface {
	ListSandboxes(ctx context.Context) ([]Sandbox, error)
}

// PruneOptions select what a Pruner removes.
type PruneOptions struct {
	// OlderThan keeps everything created less than this long ago; zero
	// selects everything.
	OlderThan time.Duration
	// KeepRunning leaves running sandboxes alone.
	KeepRunning bool
	// DryRun reports what would be removed without removing it.
	DryRun bool
}

// PruneReport lists what a Pruner removed (or would remove).
type PruneReport struct {
	Sandboxes []string `json:"sandboxes"`
	Snapshots []string `json:"snapshots"`
	// InUse lists snapshots kept because a sandbox still uses them.
	InUse []string `json:"inUse,omitempty"`
}

// Pruner removes corral's sandboxes and snapshots older than a duration.
type Pruner interface {
	Prune(ctx context.Context, o PruneOptions) (PruneReport, error)
}

// Snapshot is one of corral's snapshots as a SnapshotLister reports it.
type Snapshot struct {
	sandbox.Snapshot
	// Detail is anything else the provider reports.
	Detail any `json:"detail,omitempty"`
}

// SnapshotLister lists corral's snapshots, newest first. Deleting one is
// sandbox.Provider.DeleteSnapshot.
type SnapshotLister interface {
	ListSnapshots(ctx context.Context) ([]Snapshot, error)
}

// Pinger checks that the backend answers; the management commands call it
// first when the provider has it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// As returns p as management interface T, or an Unimplemented error that
// names the provider and the operation. It sees through the guard and
// other wrappers (sandbox.ProviderAs); T must be an interface type.
func As[T any](p sandbox.Provider, operation string) (T, error) {
	var t T
	if sandbox.ProviderAs(p, &t) {
		return t, nil
	}
	var zero T
	return zero, sandbox.Errorf(sandbox.Unimplemented, "registry", p.Name(), "the %s provider does not implement %s", p.Name(), operation)
}

// PruneSandboxes is the Pruner loop providers share: it destroys the
// sandboxes of list that o selects (created at least o.OlderThan ago, and
// not running ones when o.KeepRunning, as running tells) and reports them.
// The first failed destroy ends it, with what was removed so far.
func PruneSandboxes(ctx context.Context, list []Sandbox, o PruneOptions, running func(Sandbox) bool,
	destroy func(ctx context.Context, id string) error) (PruneReport, error) {
	rep := PruneReport{Sandboxes: []string{}, Snapshots: []string{}}
	for _, s := range list {
		if o.OlderThan > 0 && time.Since(s.CreatedAt) < o.OlderThan {
			continue
		}
		if o.KeepRunning && running(s) {
			continue
		}
		if !o.DryRun {
			if err := destroy(ctx, s.ID); err != nil {
				return rep, err
			}
		}
		rep.Sandboxes = append(rep.Sandboxes, s.ID)
	}
	return rep, nil
}
