//go:build !linux

package journal

// removeRunCgroups has nothing to remove without Linux cgroups.
func removeRunCgroups(string) {}

// newRunCgroup makes no cgroup without Linux.
func newRunCgroup(string) (string, bool) { return "", false }

// removeCgroup has nothing to remove without Linux.
func removeCgroup(string) {}

// dropRunCgroup has nothing to remove without Linux.
func dropRunCgroup(string, string) {}
