//go:build !linux

package journal

// removeRunCgroups has nothing to remove without Linux cgroups.
func removeRunCgroups(string) {}
