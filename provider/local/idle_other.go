//go:build unix && !linux

package local

// Without /proc there is no marker scan to skip, so there is no idle mark.

func markIdle(string)      {}
func markRan(string) error { return nil }
func isIdle(string) bool   { return false }
