package execproc

import (
	"bytes"
	"context"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// How a command is run. The wrapper reports its pid as the first line of
// stderr, which the Runner strips, and then execs the command, so that
// pid is the command's own. A backend that starts each command as the
// leader of a new session and process group (docker exec, most process
// APIs) makes it the group every child and backgrounded grandchild
// belongs to, which is what the group kill signals.
//
// The control line is one of:
//
//	P<pid>  the command is starting
//	D       Command.Dir does not exist
//	N       Command.Dir is not a directory
//	X       Command.Dir leads outside the workspace through a link
const (
	// wrapPlain runs in the workspace (the Spec's Dir).
	wrapPlain = `echo "P$$" >&2; exec "$@"`
)

// wrapDir checks and enters Command.Dir ($2, already mapped under the
// workspace $1) with the shared path guard, then runs the command.
var wrapDir = sandbox.ShellPathGuard + `d=$(corral_resolve "$1" "$2" 1 2>/dev/null && printf x) || { echo X >&2; exit 126; }
d=${d%?x}
if [ ! -e "$d" ]; then echo D >&2; exit 126; fi
if [ ! -d "$d" ]; then echo N >&2; exit 126; fi
cd "$d" || { echo D >&2; exit 126; }
shift 2
echo "P$$" >&2
exec "$@"
`

// LeadGroup is the last step of a provider's launcher script (a backend
// whose daemon starts commands in its own process group): it runs "$@" in
// a session of its own when setsid exists, so that the command leads a
// process group and GroupKill reaches its grandchildren, and waits for it,
// exiting with its status (128+N for signal N); without setsid it execs
// "$@". Standard input is passed on.
const LeadGroup = `if command -v setsid >/dev/null 2>&1; then exec 3<&0; setsid "$@" <&3 3<&- & wait $!; exit $?; fi
exec "$@"`

// killScript signals process group $1 with signal number $2. For SIGTERM
// it waits up to $3 ticks of 50 ms for the group to empty and then sends
// SIGKILL; for SIGTERM and SIGKILL it verifies that nothing of the group
// runs. It prints one word: gone (nothing to signal), sent (a signal that
// is only delivered), ok, or survived.
//
// A zombie is not alive: the children a killed command leaves (a journal
// follower's tail and watchdog) are orphans that the sandbox's init reaps
// when it gets to them, and until then kill -0 finds them in the group
// (an init that reaps every second or two made every kill wait that
// long). Where /proc can be read, each member's state is read from it;
// where it cannot, kill -0 decides.
const killScript = `pg=$1 sig=$2 n=$3
alive() {
  kill -0 -"$pg" 2>/dev/null || kill -0 "$pg" 2>/dev/null || return 1
  [ -r /proc/self/stat ] || return 0
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
  while [ "$i" -lt "$n" ] && alive; do sleep 0.05; i=$((i+1)); done
  if ! alive; then echo ok; exit 0; fi
  kill -9 -"$pg" 2>/dev/null; kill -9 "$pg" 2>/dev/null
fi
i=0
while [ "$i" -lt 100 ] && alive; do sleep 0.05; i=$((i+1)); done
if alive; then echo survived; else echo ok; fi
`

// GroupKill is the default kill strategy: it runs a POSIX sh kill script
// through the backend as a second command, which signals the process
// group led by pid, escalates SIGTERM to SIGKILL after grace, and checks
// (for up to five seconds after SIGKILL) that nothing of the group is
// left.
func (r *Runner) GroupKill(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
	op := r.op("kill")
	ticks := int(grace / (50 * time.Millisecond))
	res, err := r.Run(ctx, op, []string{"sh", "-c", killScript, "sh",
		strconv.Itoa(pid), strconv.Itoa(int(sig)), strconv.Itoa(ticks)}, nil, "")
	if err != nil {
		return err
	}
	switch word := strings.TrimSpace(string(res.Stdout)); word {
	case "ok", "gone", "sent":
		return nil
	case "survived":
		r.log.Warn(r.opts.Provider+": processes survived SIGKILL", "id", r.opts.ID, "pid", pid)
		return sandbox.Errorf(sandbox.Internal, op, r.opts.ID, "process group %d survived SIGKILL", pid)
	default:
		return sandbox.Errorf(sandbox.Internal, op, r.opts.ID, "kill script failed (exit %d): %s", res.ExitCode, trim(res.Stderr))
	}
}

// PIDOnly makes a kill strategy of a backend's native kill that reaches
// a single process (E2B's envd, for one, sends SIGKILL to one pid). SIGTERM
// is sent, then after grace SIGKILL if the command's stream has not ended;
// what the command started in the background is not reached. A provider
// using it must not claim KillableProcesses: the conformance suite's
// KillMeasured case measures it and fails a provider that claims it.
//
// signal sends sig to pid; a process that is gone is success. alive
// reports whether pid still runs; nil treats it as alive until the grace
// passed.
func PIDOnly(signal func(ctx context.Context, pid int, sig syscall.Signal) error, alive func(ctx context.Context, pid int) (bool, error)) KillFunc {
	return func(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
		if err := signal(ctx, pid, sig); err != nil {
			return err
		}
		if sig != syscall.SIGTERM || alive == nil {
			if sig == syscall.SIGTERM {
				return signalAfter(ctx, signal, pid, grace)
			}
			return nil
		}
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) {
			ok, err := alive(ctx, pid)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
		return signal(ctx, pid, syscall.SIGKILL)
	}
}

func signalAfter(ctx context.Context, signal func(context.Context, int, syscall.Signal) error, pid int, grace time.Duration) error {
	if err := sleepCtx(ctx, grace); err != nil {
		return err
	}
	return signal(ctx, pid, syscall.SIGKILL)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ctlWriter passes stderr through after taking the first line off it.
type ctlWriter struct {
	w    io.Writer
	on   func(string)
	buf  []byte
	done bool
}

const maxCtlLine = 24

func (c *ctlWriter) Write(b []byte) (int, error) {
	n := len(b)
	if !c.done {
		i := bytes.IndexByte(b, '\n')
		if i < 0 && len(c.buf)+len(b) <= maxCtlLine {
			c.buf = append(c.buf, b...)
			return n, nil
		}
		if i < 0 || len(c.buf)+i > maxCtlLine {
			// Not the wrapper's line: the wrapper never ran.
			c.done = true
			c.on("")
			pending := append(c.buf, b...)
			c.buf = nil
			if _, err := c.w.Write(pending); err != nil {
				return 0, err
			}
			return n, nil
		}
		line := string(append(c.buf, b[:i]...))
		c.buf = nil
		c.done = true
		c.on(line)
		b = b[i+1:]
	}
	if len(b) > 0 {
		if _, err := c.w.Write(b); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// finish ends the control phase at the end of the stream.
func (c *ctlWriter) finish() {
	if c.done {
		return
	}
	c.done = true
	c.on("")
	if len(c.buf) > 0 {
		_, _ = c.w.Write(c.buf)
	}
}

func trim(b []byte) string { return strings.TrimSpace(string(b)) }
