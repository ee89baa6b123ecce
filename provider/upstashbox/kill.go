package upstashbox

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// killScript is execproc's group kill with one difference: a zombie is
// not alive. It signals process group $1 with signal number $2; for
// SIGTERM it waits up to $3 ticks of 50 ms for the group to empty and
// then sends SIGKILL; for SIGTERM and SIGKILL it verifies that nothing of
// the group runs. It prints one word: gone (nothing to signal), sent (a
// signal that is only delivered), ok, or survived.
//
// The children a killed command leaves (a journal follower's tail and
// watchdog) are orphans, reaped by the box's init whenever it gets to
// them; until then they are zombies in the group, and kill -0 finds
// them. The generic script waited for that reaping (1.6 s a kill on a
// host whose init reaps every second or two); this one reads each
// member's state from /proc instead.
const killScript = `pg=$1 sig=$2 n=$3
live() {
  kill -0 -"$pg" 2>/dev/null || kill -0 "$pg" 2>/dev/null || return 1
  if IFS= read -r l 2>/dev/null <"/proc/$pg/stat"; then set -- ${l##*') '}; [ "$1" != Z ] && return 0; fi
  for f in /proc/[0-9]*/stat; do
    IFS= read -r l 2>/dev/null <"$f" || continue
    set -- ${l##*') '}
    [ "$3" = "$pg" ] && [ "$1" != Z ] && return 0
  done
  return 1
}
kill -"$sig" -"$pg" 2>/dev/null || kill -"$sig" "$pg" 2>/dev/null || { echo gone; exit 0; }
if [ "$sig" != 15 ] && [ "$sig" != 9 ]; then echo sent; exit 0; fi
i=0
if [ "$sig" = 15 ]; then
  while [ "$i" -lt "$n" ] && live; do sleep 0.05; i=$((i+1)); done
  if ! live; then echo ok; exit 0; fi
  kill -9 -"$pg" 2>/dev/null; kill -9 "$pg" 2>/dev/null
fi
i=0
while [ "$i" -lt 100 ] && live; do sleep 0.05; i=$((i+1)); done
if live; then echo survived; else echo ok; fi
`

// kill is the handle's execproc.KillFunc: killScript over an exec
// session.
func (h *handle) kill(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
	op := Name + ".kill"
	ticks := int(grace / (50 * time.Millisecond))
	res, err := h.run.Run(ctx, op, []string{"sh", "-c", killScript, "sh",
		strconv.Itoa(pid), strconv.Itoa(int(sig)), strconv.Itoa(ticks)}, nil, "")
	if err != nil {
		return err
	}
	switch word := strings.TrimSpace(string(res.Stdout)); word {
	case "ok", "gone", "sent":
		return nil
	case "survived":
		h.p.log.Warn("upstashbox: processes survived SIGKILL", "id", h.b.ID, "pid", pid)
		return sandbox.Errorf(sandbox.Internal, op, h.b.ID, "process group %d survived SIGKILL", pid)
	default:
		return sandbox.Errorf(sandbox.Internal, op, h.b.ID, "kill script failed (exit %d): %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
}
