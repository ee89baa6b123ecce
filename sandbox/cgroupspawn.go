package sandbox

import "context"

// CgroupSpawner is an optional interface of a Handle whose processes run
// on the calling process's host and that can start a process directly in a
// cgroup v2 directory (Linux: clone3 with CLONE_INTO_CGROUP), so that the
// process and its children are in that cgroup from their first
// instruction without a migration. The journal uses it to start a run's
// wrapper in the run's cgroup: on a hierarchy without favordynmods a
// migration waits for an RCU grace period after a quiet spell, a birth in
// the cgroup does not.
//
// Reach it through As, never by asserting the Handle's dynamic type.
type CgroupSpawner interface {
	// SpawnInCgroup is Spawn with the process started in the cgroup
	// directory dir (a path under the host's cgroup v2 mount). It fails
	// with Unimplemented where the kernel cannot (the caller then spawns
	// as usual and moves the process itself).
	SpawnInCgroup(ctx context.Context, cmd Command, dir string) (Process, error)
}
