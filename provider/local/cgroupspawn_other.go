//go:build !linux

package local

import "syscall"

// intoCgroup is never called without Linux (no handle offers
// SpawnInCgroup there).
func intoCgroup(*syscall.SysProcAttr, int) { panic("local: no cgroups without Linux") }
