package upstashbox

import (
	"context"
	"io"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// A spawned command runs detached from every connection:
//
//  1. A session writes the command's spec from its stdin into a file only
//     the box user reads: one export line per variable of its
//     environment (names checked, values quoted by sandbox.ShellQuote)
//     and an exec of its argv, each word quoted the same way. Neither the
//     values nor the argv ever stand in a REST body or in the argv of a
//     process other than the command's own.
//  2. The HTTP exec runs launchScript, which enters the working directory,
//     starts the waiter in a new session with setsid, records the
//     waiter's pid (the launcher's $!) and returns. The waiter starts
//     `sh <spec>` with setsid (so the command leads its own session and
//     process group, which the group kill signals; the spec removes
//     itself and execs the argv, so the pid is the command's), its
//     stdout and stderr appended to two files, waits for it and writes
//     its exit code to a third.
//  3. A session runs followScript, which copies both files from the
//     offsets already received and exits with the command's code once the
//     code file exists. If that socket drops, the follower dies (as Upstash
//     kills a session's command with its socket) and the command does not:
//     the follower is dialled again from the offsets received.
//
// So nothing a spawned command is depends on a socket staying open: a
// journal wrapper started by a corral process that dies runs on, and a
// new process takes the run over from the journal. And nothing but the
// command carries its argv: something in the box that kills by argv
// (journaltest's follow/FollowerShellKilled does) reaches the command
// alone, never the launcher or the waiter before they recorded what the
// follower needs (a launcher killed before its setsid left no waiter and
// no pid, and the follower waited for a code that never came).
const launchScript = `d=$1 c=$2
[ -f "$d/c" ] || { echo "corral: the command's spec $d/c is missing" >&2; exit 1; }
cd "$c" || exit 126
setsid sh -c '` + waiter + `' sh "$d" sh "$d/c" </dev/null >/dev/null 2>&1 &
echo $! >"$d/w.t" && mv "$d/w.t" "$d/w" || exit 1
exit 0`

// waiter starts "$@" (after $1, the directory) with setsid, its stdin
// the waiter's own (through fd 3: an asynchronous list's stdin is
// /dev/null before its redirections; then closed here), stdout and
// stderr appended to $1/o and $1/e; waits; writes the exit code to $1/x.
// Its pid is in $1/w, written by whoever started it (its $!) before any
// follower looks. It holds no single quote.
const waiter = `d=$1; shift; exec 3<&0; setsid "$@" <&3 3<&- >>"$d/o" 2>>"$d/e" & exec 0</dev/null 3<&-; wait $!; echo $? >"$d/x.t"; mv "$d/x.t" "$d/x"`

// followScript copies $1/o to stdout and $1/e to stderr from byte
// offsets $2 and $3 until $1/x holds the exit code, then exits with it
// (removing $1 first when $5 is "rm"). stderr goes first in each round:
// execproc's control line (the pid) is stderr's first line, and a caller
// that waits for it reads no stdout until then (a 4 MiB flood of stdout
// before it would never be read).
// A waiter that is not running without having written the code (killed,
// or its pid file missing) counts as exit 137 once the output is
// drained. It sends at most $4 bytes (below the session's 8 MiB cap) and
// then exits 254 to be dialled again from the new offsets: an exit of
// 254 after fewer bytes than $4 is the command's own. It polls the files
// every 10 ms for its first 20 idle rounds, then every 50 ms.
const followScript = `d=$1 no=$2 ne=$3 b=$4 n=0 i=0
[ -d "$d" ] || { echo "corral: the command's directory $d is gone" >&2; exit 125; }
sz() { if [ -f "$1" ]; then wc -c <"$1"; else echo 0; fi; }
while :; do
  f=0; [ -f "$d/x" ] && f=1
  so=$(($(sz "$d/o"))); se=$(($(sz "$d/e"))); m=0
  if [ "$se" -gt "$ne" ] && [ "$n" -lt "$b" ]; then k=$((se-ne)); if [ "$k" -gt $((b-n)) ]; then k=$((b-n)); f=0; fi
    tail -c +$((ne+1)) "$d/e" | head -c "$k" >&2; ne=$((ne+k)); n=$((n+k)); m=1; fi
  if [ "$so" -gt "$no" ] && [ "$n" -lt "$b" ]; then k=$((so-no)); if [ "$k" -gt $((b-n)) ]; then k=$((b-n)); f=0; fi
    tail -c +$((no+1)) "$d/o" | head -c "$k"; no=$((no+k)); n=$((n+k)); m=1; fi
  if [ $f = 1 ] && [ "$no" -ge "$so" ] && [ "$ne" -ge "$se" ]; then c=$(cat "$d/x"); [ "$5" = rm ] && rm -rf "$d"; exit "$c"; fi
  [ "$n" -ge "$b" ] && exit 254
  if [ $m = 0 ] && [ $f = 0 ] && ! { w=$(cat "$d/w" 2>/dev/null) && [ -n "$w" ] && grep -qs '^State:[[:space:]]*[RSDT]' "/proc/$w/status"; } && [ ! -f "$d/x" ]; then
    echo 137 >"$d/x"; continue; fi
  if [ $m = 0 ]; then i=$((i+1)); if [ $i -lt 20 ]; then sleep 0.01; else sleep 0.05; fi; fi
done`

// execScript is an Exec's session: the command is started as a spawned
// one is (its stdin the session's), then followed in the same session.
// Output past the follower's budget is read by followers dialled again.
const execScript = `d=$1 b=$2 F=$3; shift 3
mkdir -p "$d" || exit 1
exec 3<&0
setsid sh -c '` + waiter + `' sh "$d" "$@" <&3 3<&- >/dev/null 2>&1 &
echo $! >"$d/w.t" && mv "$d/w.t" "$d/w" || exit 1
exec 0</dev/null 3<&-
exec sh -c "$F" sh "$d" 0 0 "$b" rm`

// followBudget is what one follower session sends.
const followBudget = 4 << 20

// maxRedials bounds how often a spawned command's follower is dialled
// again after drops.
const maxRedials = 8

// followed is a command run detached and read through follower
// sessions: a spawned command (started by the HTTP exec) or an Exec (its
// first session starts it and is its stdin).
type followed struct {
	h      *handle
	op     string
	dir    string
	spawn  bool
	first  *wsStream
	cur    atomic.Pointer[wsStream]
	closed atomic.Bool
	out    atomic.Int64
	errb   atomic.Int64
	redial atomic.Int64
	code   atomic.Pointer[int]
	clean  sync.Once
}

func (h *handle) procDir(id string) string { return path.Join(path.Dir(h.root), ".corral-procs", id) }

// startExec starts an Exec's session (execScript), its environment in
// the start frame.
func (h *handle) startExec(ctx context.Context, op string, spec execproc.Spec) (*followed, error) {
	dir := h.procDir(randomHex(8))
	argv := append([]string{"sh", "-c", execScript, "sh", dir, itoa(followBudget), followScript}, spec.Argv...)
	s, err := h.session(ctx, op, Frame{Type: "start", Argv: argv, Cwd: spec.Dir, Env: spec.Env})
	if err != nil {
		return nil, err
	}
	d := &followed{h: h, op: op, dir: dir, first: s}
	d.cur.Store(s)
	return d, nil
}

// spawnDetached starts spec detached (steps 1 and 2) and its follower.
func (h *handle) spawnDetached(ctx context.Context, op string, spec execproc.Spec) (*followed, error) {
	dir := h.procDir(randomHex(8))
	script, err := specScript(spec.Env, spec.Argv)
	if err != nil {
		return nil, err
	}
	s, err := h.session(ctx, op, Frame{Type: "start", Cwd: "/", Argv: []string{"sh", "-c",
		`umask 077; mkdir -p "$1" && cat >"$1/c.t" && mv "$1/c.t" "$1/c"`, "sh", dir}})
	if err != nil {
		return nil, err
	}
	_, werr := s.Write([]byte(script))
	if werr == nil {
		werr = s.CloseStdin()
	}
	cerr := s.Copy(io.Discard, io.Discard)
	_ = s.Close()
	code, _ := s.Exit(ctx)
	if werr != nil || cerr != nil || code != 0 {
		return nil, sandbox.Errorf(sandbox.Unavailable, op, h.b.ID, "writing the command's spec failed (exit %d): %v %v", code, werr, cerr)
	}
	wd := spec.Dir
	if wd == "" {
		wd = h.root
	}
	res, err := h.httpExec(ctx, op, []string{"sh", "-c", launchScript, "sh", dir, wd})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, sandbox.Errorf(sandbox.Internal, op, h.b.ID, "starting the command detached exited %d: %s", res.ExitCode, strings.TrimSpace(res.Error))
	}
	d := &followed{h: h, op: op, dir: dir, spawn: true}
	if err := d.follow(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// follow dials a follower from the offsets received so far.
func (d *followed) follow(ctx context.Context) error {
	s, err := d.h.session(ctx, d.op, Frame{Type: "start", Cwd: "/", Argv: []string{"sh", "-c", followScript, "sh",
		d.dir, itoa(d.out.Load()), itoa(d.errb.Load()), itoa(followBudget), map[bool]string{true: "keep", false: "rm"}[d.spawn]}})
	if err != nil {
		return err
	}
	d.cur.Store(s)
	if d.closed.Load() {
		_ = s.Close()
	}
	return nil
}

// counter counts what reaches w.
type counter struct {
	w    io.Writer
	n    *atomic.Int64
	sess *int64
}

func (c counter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	*c.sess += int64(n)
	return n, err
}

// Copy copies the followers' output: a follower that spent its budget is
// dialled again; a spawned command's follower is dialled again after a
// drop too (an Exec's drop is its end: Unavailable).
func (d *followed) Copy(stdout, stderr io.Writer) error {
	for {
		var sess int64
		o, e := counter{stdout, &d.out, &sess}, counter{stderr, &d.errb, &sess}
		s := d.cur.Load()
		err := s.Copy(o, e)
		if d.closed.Load() {
			return nil
		}
		switch {
		case err == nil:
			c := s.code.Load()
			if c != nil && *c == 254 && sess >= followBudget {
				break // the budget is spent: follow on
			}
			if c != nil {
				d.code.Store(c)
			}
			return nil
		case !d.spawn:
			return err
		case d.redial.Add(1) > maxRedials:
			return err
		}
		_ = s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		ferr := d.follow(ctx)
		cancel()
		if ferr != nil {
			return ferr
		}
	}
}

// Write writes an Exec's stdin; a spawned command reads /dev/null (the
// provider does not claim writableStdin).
func (d *followed) Write(p []byte) (int, error) {
	if d.first == nil {
		return 0, sandbox.Unsupported(Name, "writableStdin")
	}
	return d.first.Write(p)
}

// CloseStdin half-closes an Exec's stdin (see Write).
func (d *followed) CloseStdin() error {
	if d.first == nil {
		return sandbox.Unsupported(Name, "writableStdin")
	}
	return d.first.CloseStdin()
}

// Exit returns the command's exit code and removes its files.
func (d *followed) Exit(context.Context) (int, error) {
	c := d.code.Load()
	if c == nil {
		return -1, sandbox.Errorf(sandbox.Unavailable, d.op, d.h.b.ID, "the command's output ended without its exit code")
	}
	if !d.spawn {
		return *c, nil // the follower removed the files
	}
	d.clean.Do(func() {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = d.h.httpExec(ctx, d.op, []string{"rm", "-rf", "--", d.dir})
		}()
	})
	return *c, nil
}

// Close drops the follower; the command runs on.
func (d *followed) Close() error {
	d.closed.Store(true)
	if s := d.cur.Load(); s != nil {
		_ = s.Close()
	}
	return nil
}
