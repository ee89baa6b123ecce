//go:build unix && !linux

package local

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"time"
)

// groupAlive reports whether process group pgid has a member.
func groupAlive(pgid int) bool {
	return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// groupLive stands in for a /proc scan: the group itself when it has a
// member.
func groupLive(pgid int) []int {
	if groupAlive(pgid) {
		return []int{pgid}
	}
	return nil
}

// liveAmong needs /proc; without it no member is watched one by one.
func liveAmong(int, []int) []int { return nil }

// descendants needs /proc.
func descendants(int) []int { return nil }

// killByMarker needs /proc; elsewhere only processes this corral process
// started are killed on destroy.
func killByMarker(context.Context, string, time.Duration, *slog.Logger) {}
