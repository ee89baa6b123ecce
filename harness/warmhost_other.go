//go:build !unix

package harness

import "github.com/d10ffeed/corral/sandbox"

// LookWarmKeeper reports ok false: without unix the check runs in the
// sandbox.
func LookWarmKeeper(sandbox.Handle, string) (WarmKeeperFiles, bool) { return WarmKeeperFiles{}, false }
