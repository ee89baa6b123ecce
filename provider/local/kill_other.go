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

// killByMarker needs /proc; elsewhere only processes this corral process
// started are killed on destroy.
func killByMarker(context.Context, string, time.Duration, *slog.Logger) {}
