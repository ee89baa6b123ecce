//go:build !unix

package harness

import "github.com/d10ffeed/corral/sandbox"

// WarmKeeperFiles is what a keeper directory records (see the unix build).
type WarmKeeperFiles struct {
	PID             int
	PIDAlive        bool
	Busy            string
	BusyAlive       bool
	Digest, Session string
	LogSize         int64
}

// LookWarmKeeper reports ok false: without unix the check runs in the
// sandbox.
func LookWarmKeeper(sandbox.Handle, string) (WarmKeeperFiles, bool) { return WarmKeeperFiles{}, false }
