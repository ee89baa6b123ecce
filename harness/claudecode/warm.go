package claudecode

// Warm sessions (option warm=true): one Claude Code process per thread
// stays running in the sandbox between the thread's runs, reading its
// turns as stream-json lines on stdin (--input-format stream-json), so a
// next turn skips the CLI's start.
//
//   - The keeper: Prepare (through the handle, never under a run's journal
//     wrapper, so no run's process scope claims it) starts the CLI under
//     setsid, stdin from a FIFO it holds open read-write itself, stdout
//     appended to a session log, in a per-thread directory beside the
//     journals (0700, outside the workspace). The directory records the
//     keeper's pid, the digest of everything baked into the process at its
//     start (argv but the session flags, environment, the instructions
//     file's checksum) and the session it serves.
//   - Each turn's journaled command is the turn client (turnClient): the
//     prompt line on its stdin, it checks the keeper is the one Prepare
//     found, notes the log's size, writes the line into the FIFO and relays
//     the log from there to the turn's result line, exiting 0, or 1 when
//     the result is an error or the keeper died. The journal wrapper wraps
//     it as any agent, so the turn is journaled, taken over and delivered
//     exactly once as a cold one.
//   - Cancel: the client's SIGTERM trap kills the keeper's whole session,
//     so the next turn starts cold with --resume.
//   - Fallback: no live keeper, a digest or session that differs, or a
//     turn client that died mid-turn (its busy file names a dead pid):
//     Prepare kills what is left and starts a new keeper with --resume
//     SESSION (or a fresh --session-id). A keeper busy with another live
//     turn of the thread, a sandbox without setsid or mkfifo, or a turn
//     that needs per-run files the process would read after the run (the
//     permission tool, MCP servers, projected skills) runs cold.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// OptWarm is the option that keeps the CLI running between a thread's
// runs ("true"; default "false").
const OptWarm = "warm"

// Warm reports whether the options ask for a warm session
// (harness.Warmer): the runner then gives the turn no per-run agent tools,
// which the kept process would still hold after the run.
func (Harness) Warm(options map[string]string) bool {
	warm, err := strconv.ParseBool(strings.TrimSpace(options[OptWarm]))
	return err == nil && warm
}

// WarmDirPrefix begins the name of a thread's keeper directory, beside the
// run journals (path.Dir of Request.RunDir).
const WarmDirPrefix = "claude-warm-"

// warmDir is the keeper directory of a thread.
func warmDir(req harness.Request) string {
	sum := sha256.Sum256([]byte(req.ThreadID))
	return path.Join(path.Dir(req.RunDir), WarmDirPrefix+hex.EncodeToString(sum[:8]))
}

// ensureKeeper checks the thread's keeper and starts a new one when it
// cannot serve the turn. Args: dir, digest, session, instructions file (or
// ""), then the CLI's argv. Prints "warm PID", "started PID", "busy" or
// "unsupported".
const ensureKeeper = harness.KeeperAlive + `d=$1 dg=$2 ses=$3 ins=$4; shift 4
command -v setsid >/dev/null 2>&1 && command -v mkfifo >/dev/null 2>&1 || { echo unsupported; exit 0; }
[ -n "$ins" ] && [ -f "$ins" ] && dg="$dg $(cksum <"$ins")"
umask 077; mkdir -p "$d" || exit 1
p=$(cat "$d/pid" 2>/dev/null) b=$(cat "$d/busy" 2>/dev/null)
if [ -n "$p" ] && alive "$p"; then
  if [ -n "$b" ] && alive "$b"; then echo busy; exit 0; fi
  if [ -z "$b" ] && [ "$(cat "$d/digest" 2>/dev/null)" = "$dg" ] && [ "$(cat "$d/session" 2>/dev/null)" = "$ses" ]; then echo "warm $p"; exit 0; fi
  kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
fi
rm -f "$d/in" "$d/busy" "$d/pid" "$d/log" "$d/relay".*
mkfifo "$d/in" && : >"$d/log" || exit 1
printf '%s\n' "$dg" >"$d/digest"; printf '%s\n' "$ses" >"$d/session"
setsid sh -c 'd=$1; shift; exec 3<>"$d/in"; "$@" <&3 >>"$d/log" 2>"$d/err"; printf "{\"type\":\"corral\",\"subtype\":\"warm_exited\",\"exit\":%d}\n" $? >>"$d/log"' corral-claude-keeper "$d" "$@" </dev/null >/dev/null 2>&1 &
p=$!
echo "$p" >"$d/pid"
# The CLI drops what arrives on stdin before it reads it: ask it to
# initialize until it answers, then the turn's line is read.
i=0
while :; do
  alive "$p" || { echo "the warm claude process exited at start: $(tail -c 1000 "$d/err" 2>/dev/null)" >&2; exit 1; }
  exec 4<>"$d/in"
  printf '%s\n' '{"type":"control_request","request_id":"corral-ready","request":{"subtype":"initialize"}}' >&4
  exec 4>&-
  j=0
  while [ $j -lt 40 ] && ! grep -q '"control_response"' "$d/log"; do sleep 0.05; j=$((j+1)); done
  [ $j -lt 40 ] && break
  i=$((i+1))
  [ $i -lt 30 ] || { kill -KILL "-$p" 2>/dev/null; echo "the warm claude process did not answer in 60s" >&2; exit 1; }
done
echo "started $p"
`

// turnClient is a warm turn's journaled command. Args: dir, keeper pid,
// a note line to print first (or ""). Stdin: the turn's stream-json user
// line.
const turnClient = harness.KeeperAlive + `d=$1 kp=$2 note=$3
[ -n "$note" ] && printf '%s\n' "$note"
if [ "$(cat "$d/pid" 2>/dev/null)" != "$kp" ] || ! alive "$kp"; then
  echo "corral: the warm Claude Code process $kp is gone" >&2; exit 1
fi
echo $$ >"$d/busy"
r="$d/relay.$$" tp= wp= cp=
trap 'kill -KILL "-$kp" 2>/dev/null; kill -KILL "$kp" $tp $wp $cp 2>/dev/null; rm -f "$d/busy" "$r"; exit 143' TERM INT HUP
off=$(wc -c <"$d/log")
mkfifo "$r" || exit 1
tail -c +$((off+1)) -f "$d/log" >"$r" 2>/dev/null &
tp=$!
# Opened read-write, the FIFO never blocks its opener; the prompt is
# written in the background, so a keeper that died cannot hold the turn.
# (An asynchronous command's stdin is /dev/null: the prompt goes by fd 5.)
exec 4<>"$d/in" 5<&0
cat <&5 >&4 &
cp=$!
exec 4>&- 5<&-
( while alive "$kp"; do sleep 0.2; done; kill "$tp" "$cp" 2>/dev/null ) >/dev/null 2>&1 &
wp=$!
# mawk fills its input buffer before it reads a line, unless interactive.
aw=awk
case $(awk -W version 2>&1 </dev/null) in *mawk*) aw="awk -W interactive" ;; esac
$aw '{ print; fflush() }
/^\{"type":"corral","subtype":"warm_exited"/ { exit }
/^\{"type":"(stream_event|assistant|user|system|corral)"/ { next }
/"type":"result"/ { st = index($0, "\"is_error\":true") ? 1 : 0; done = 1; exit }
END { if (!done) st = 1; exit st }' <"$r"
st=$?
kill "$tp" "$wp" "$cp" 2>/dev/null
rm -f "$r" "$d/busy"
if [ "$st" != 0 ] && [ -s "$d/err" ]; then tail -c 2000 "$d/err" >&2; fi
exit "$st"
`

// warmTurn is what prepareWarm needs from Prepare.
type warmTurn struct {
	args    []string // the CLI's argv, prefix included, without session flags
	env     map[string]string
	session string // the session to resume; "" for a fresh one
	note    string // a line for the journal first (resume_failed), or ""
	instr   string // the instructions file, or ""
}

// prepareWarm returns the turn client's invocation, ensuring the keeper;
// ok false means the turn runs cold.
func prepareWarm(ctx context.Context, h sandbox.Handle, req harness.Request, w warmTurn) (harness.Invocation, bool, error) {
	const op = "claudecode.warm"
	dir := warmDir(req)
	session, flag := w.session, "--resume"
	if session == "" {
		session, flag = newSessionID(), "--session-id"
	}
	args := append(append([]string{}, w.args...), "--input-format", "stream-json", flag, session)
	script := []string{"sh", "-c", ensureKeeper, "corral-claude-warm", dir, warmDigest(w), session, w.instr}
	res, err := h.Exec(ctx, sandbox.Command{Args: append(script, args...), Env: w.env})
	if err != nil {
		return harness.Invocation{}, false, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if res.ExitCode != 0 {
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "starting the warm process exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	out := strings.Fields(string(res.Stdout))
	if len(out) != 2 || (out[0] != "warm" && out[0] != "started") {
		return harness.Invocation{}, false, nil // busy or unsupported: cold
	}
	if _, err := strconv.Atoi(out[1]); err != nil {
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "the warm process check printed %q", res.Stdout)
	}
	cmd := sandbox.Command{Args: []string{"sh", "-c", turnClient, "corral-claude-turn", dir, out[1], w.note}}
	line := mustJSON(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": req.Prompt}}}})
	return harness.Invocation{Command: cmd, Stdin: []byte(line + "\n")}, true, nil
}

// warmDigest digests what is baked into the process at its start.
func warmDigest(w warmTurn) string { return harness.KeeperDigest(w.args, w.env) }

// newSessionID returns a random UUID (version 4) for --session-id.
func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
