//go:build !linux

package lean

func trimExecutable() int64 { return 0 }
