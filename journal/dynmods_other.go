//go:build !linux

package journal

import "github.com/d10ffeed/corral/sandbox"

// HostCgroup describes the cgroup v2 hierarchy of this host; without
// Linux there is none.
type HostCgroup struct {
	// Mount is the hierarchy's mount point ("" when there is none).
	Mount string
	// FavorDynMods reports whether it is mounted with favordynmods.
	FavorDynMods bool
}

// LookHostCgroup returns the zero HostCgroup: no cgroups without Linux.
func LookHostCgroup() (HostCgroup, error) { return HostCgroup{}, nil }

// EnableFavorDynMods is Unimplemented without Linux.
func (HostCgroup) EnableFavorDynMods() error {
	return sandbox.Errorf(sandbox.Unimplemented, "journal.cgroup", "", "no cgroups without Linux")
}

// DisableFavorDynMods does nothing without Linux.
func (HostCgroup) DisableFavorDynMods() error { return nil }
