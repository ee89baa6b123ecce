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
	"encoding/hex"
	"maps"
	"path"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// OptWarm is the option that keeps the CLI running between a thread's
// runs ("true"; default "false").
const OptWarm = harness.OptWarm

// Warm reports whether the options ask for a warm session
// (harness.Warmer): the runner then gives the turn no per-run agent tools,
// which the kept process would still hold after the run.
func (Harness) Warm(options map[string]string) bool { return harness.WarmOption(options) }

// WarmDirPrefix begins the name of a thread's keeper directory, beside the
// run journals (path.Dir of Request.RunDir).
const WarmDirPrefix = "claude-warm-"

// warmDir is the keeper directory of a thread.
func warmDir(req harness.Request) string { return harness.WarmDir(req, WarmDirPrefix) }

// ensureKeeper checks the thread's keeper and starts a new one when it
// cannot serve the turn. Args: dir, digest, the session the turn asks for
// (or ""), a fresh session id, instructions file (or ""), then the CLI's
// argv without session flags. Prints "warm PID", "started PID resumed",
// "started PID fresh" (the asked-for session has no transcript, or none
// was asked for: the keeper has the fresh id), "busy" or "unsupported".
// A keeper that serves the turn is found with builtins only (no fork);
// a new one is handed the turn's prompt as soon as the turn client has
// it: the CLI reads its stdin (the FIFO) when it is ready, and nothing
// written before is lost, so there is no handshake to wait for.
const ensureKeeper = harness.WarmAliveSh + `d=$1 dg=$2 ses=$3 fresh=$4 ins=$5; shift 5
command -v setsid >/dev/null 2>&1 && command -v mkfifo >/dev/null 2>&1 || { echo unsupported; exit 0; }
[ -n "$ins" ] && [ -f "$ins" ] && dg="$dg $(cksum <"$ins")"
umask 077; [ -d "$d" ] || mkdir -p "$d" || exit 1
p= b= od= os=
[ -r "$d/pid" ] && read -r p <"$d/pid"
[ -r "$d/busy" ] && read -r b <"$d/busy"
[ -r "$d/digest" ] && read -r od <"$d/digest"
[ -r "$d/session" ] && read -r os <"$d/session"
if [ -n "$p" ] && alive "$p"; then
  if [ -n "$b" ] && alive "$b"; then echo busy; exit 0; fi
  if [ -z "$b" ] && [ -n "$ses" ] && [ "$od" = "$dg" ] && [ "$os" = "$ses" ]; then echo "warm $p"; exit 0; fi
  kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
fi
how=fresh
if [ -n "$ses" ]; then
  cfg=${CLAUDE_CONFIG_DIR:-$HOME/.claude}
  for f in "$cfg"/projects/*/"$ses".jsonl; do [ -f "$f" ] && how=resumed && break; done
fi
if [ "$how" = resumed ]; then set -- "$@" --resume "$ses"; else ses=$fresh; set -- "$@" --session-id "$ses"; fi
rm -f "$d/in" "$d/busy" "$d/pid" "$d/log" "$d/gate" "$d/relay".*
mkfifo "$d/in" && : >"$d/log" || exit 1
printf '%s\n' "$dg" >"$d/digest"; printf '%s\n' "$ses" >"$d/session"
# mawk fills its input buffer before it reads a line, unless interactive:
# the turn client's relay reads its choice here.
case $(awk -W version 2>&1 </dev/null) in *mawk*) echo "awk -W interactive" ;; *) echo awk ;; esac >"$d/awk"
setsid sh -c 'd=$1; shift; exec 3<>"$d/in"; "$@" <&3 >>"$d/log" 2>"$d/err"; printf "{\"type\":\"corral\",\"subtype\":\"warm_exited\",\"exit\":%d}\n" $? >>"$d/log"' corral-claude-keeper "$d" "$@" </dev/null >/dev/null 2>&1 &
p=$!
echo "$p" >"$d/pid"
echo "started $p $how"
`

// turnClient is a warm turn's journaled command. Args: dir, keeper pid,
// a note line to print first (or ""), the session log's size when the
// caller read it (or ""), "small" when the prompt line is shorter than
// smallPrompt bytes. Stdin: the turn's stream-json user line. Up to the
// prompt's write it forks nothing when it is given the log's size and a
// small prompt (else the size's wc and the writer's cat); the relay (a
// FIFO and tail -f on the log from the noted offset; GNU tail follows by
// inotify) starts after it.
const turnClient = harness.WarmAliveSh + `d=$1 kp=$2 note=$3 off=$4 small=$5
[ -n "$note" ] && printf '%s\n' "$note"
p=
[ -r "$d/pid" ] && read -r p <"$d/pid"
if [ "$p" != "$kp" ] || ! alive "$kp"; then
  echo "corral: the warm Claude Code process $kp is gone" >&2; exit 1
fi
echo $$ >"$d/busy"
r="$d/relay.$$" tp= wp= cp=
trap 'kill -KILL "-$kp" 2>/dev/null; kill -KILL "$kp" $tp $wp $cp 2>/dev/null; rm -f "$d/busy" "$r"; exit 143' TERM INT HUP
case $off in ''|*[!0-9]*) off=$(wc -c <"$d/log") ;; esac
# Opened read-write, the FIFO never blocks its opener. A small prompt
# is written by the shell itself: less than a pipe's buffer into a FIFO
# the keeper drains between turns, so the write cannot block. A larger
# one is written in the background, so a keeper that died cannot hold
# the turn (an asynchronous command's stdin is /dev/null: the prompt goes
# by fd 5). It goes in before the relay starts, which reads the log from
# the offset noted above, so the relay's set-up is off the turn's path.
exec 4<>"$d/in"
if [ "$small" = small ]; then
  IFS= read -r cl; printf '%s\n' "$cl" >&4
else
  exec 5<&0
  cat <&5 >&4 &
  cp=$!
  exec 5<&-
fi
exec 4>&-
mkfifo "$r" || { kill -KILL "-$kp" 2>/dev/null; rm -f "$d/busy"; exit 1; }
tail -c +$((off+1)) -f "$d/log" >"$r" 2>/dev/null &
tp=$!
# The watchdog: a keeper killed with its whole session writes no
# warm_exited line; this ends the relay then (off the turn's path).
( while alive "$kp"; do sleep 0.5; done; kill "$tp" "$cp" 2>/dev/null ) >/dev/null 2>&1 &
wp=$!
aw=awk
[ -r "$d/awk" ] && read -r aw <"$d/awk"
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

// warmGate is the thread's diff gate: the turn's journal wrapper holds it
// while it records the working tree's starting state beside the turn's
// start (harness.Invocation.DiffGate), and the keeper's tools wait for it
// (warmSettings). Claude Code changes files only through its tools (corral
// projects no hooks or MCP servers into a warm keeper), so the baseline
// is the tree before the turn's first change.
func warmGate(req harness.Request) string { return path.Join(warmDir(req), "gate") }

// gateHook is the PreToolUse hook's command: it waits while the gate
// exists and the wrapper it names lives (a wrapper killed before it
// removed the gate holds nothing), then lets the tool's own decision go
// on (exit 0, no output).
func gateHook(gate string) string {
	return `g=` + sandbox.ShellQuote(gate) + `; while [ -e "$g" ]; do p=; read -r p <"$g" 2>/dev/null; [ -n "$p" ] && kill -0 "$p" 2>/dev/null || break; sleep 0.002; done; exit 0`
}

// warmSettings returns the keeper's --settings: base with a PreToolUse
// hook on every tool that waits on the gate.
func warmSettings(base map[string]any, gate string) map[string]any {
	s := maps.Clone(base)
	if s == nil {
		s = map[string]any{}
	}
	s["hooks"] = map[string]any{"PreToolUse": []any{map[string]any{
		"matcher": "*",
		"hooks":   []any{map[string]any{"type": "command", "command": gateHook(gate), "timeout": gateHookTimeout}},
	}}}
	return s
}

// gateHookTimeout bounds a tool's wait on the gate, in seconds (a
// baseline of a very large tree may take long; a stuck one must not hold
// the turn for ever).
const gateHookTimeout = 600

// warmTurn is what prepareWarm needs from Prepare.
type warmTurn struct {
	args    []string // the CLI's argv, prefix included, without session flags
	env     map[string]string
	session string // the session the turn asks for (Request.Session); "" for a fresh one
	instr   string // the instructions file, or ""
}

// prepareWarm returns the turn client's invocation, ensuring the keeper in
// one exec (which also looks for the session's transcript when it starts
// one); ok false means the turn runs cold.
func prepareWarm(ctx context.Context, h sandbox.Handle, req harness.Request, w warmTurn) (harness.Invocation, bool, error) {
	const op = "claudecode.warm"
	dir := warmDir(req)
	out, logSize, ok := hostWarm(h, dir, w)
	if !ok {
		script := []string{"sh", "-c", ensureKeeper, "corral-claude-warm", dir, warmDigest(w), w.session, newSessionID(), w.instr}
		res, err := h.Exec(ctx, sandbox.Command{Args: append(append(script, w.args...), "--input-format", "stream-json"), Env: w.env})
		if err != nil {
			return harness.Invocation{}, false, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
		}
		if res.ExitCode != 0 {
			return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "starting the warm process exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		out = strings.Fields(string(res.Stdout))
	}
	switch {
	case len(out) == 2 && out[0] == "warm":
	case len(out) == 3 && out[0] == "started" && (out[2] == "resumed" || out[2] == "fresh"):
	default:
		if len(out) == 1 && (out[0] == "busy" || out[0] == "unsupported") {
			return harness.Invocation{}, false, nil // cold
		}
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "the warm process check printed %q", strings.Join(out, " "))
	}
	if _, err := strconv.Atoi(out[1]); err != nil {
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "the warm process check printed %q", strings.Join(out, " "))
	}
	note := ""
	if len(out) == 3 && out[2] == "fresh" && w.session != "" {
		note = mustJSON(map[string]any{"type": "corral", "subtype": "resume_failed", "session_id": w.session})
	}
	line := mustJSON(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": req.Prompt}}}})
	off, small := "", ""
	if logSize >= 0 {
		off = strconv.FormatInt(logSize, 10)
	}
	if len(line) < smallPrompt {
		small = "small"
	}
	cmd := sandbox.Command{Args: []string{"sh", "-c", turnClient, "corral-claude-turn", dir, out[1], note, off, small}}
	return harness.Invocation{Command: cmd, Stdin: []byte(line + "\n"), DiffGate: warmGate(req)}, true, nil
}

// hostWarm is ensureKeeper's "warm PID" answer found without a process,
// where the sandbox's files and processes are the host's
// (harness.LookWarmKeeper): a live keeper, no busy file, the same digest
// and session. Anything else (and a turn with an instructions file, whose
// checksum the digest includes) is the script's to decide: ok false.
// It also returns the session log's size (-1 when it was not read), from
// which the turn's relay reads: the keeper writes to the log only while
// it answers a prompt, and the thread's last turn ended with its result
// line in the log, so nothing the log gains before this turn's prompt is
// another turn's.
func hostWarm(h sandbox.Handle, dir string, w warmTurn) ([]string, int64, bool) {
	if w.instr != "" || w.session == "" {
		return nil, -1, false
	}
	k, ok := harness.LookWarmKeeper(h, dir)
	if !ok || !k.PIDAlive || k.Busy != "" || k.Digest != warmDigest(w) || k.Session != w.session {
		return nil, -1, false
	}
	return []string{"warm", strconv.Itoa(k.PID)}, k.LogSize, true
}

// smallPrompt bounds the prompt lines the turn client writes with the
// shell's own read and printf (its read takes a byte per system call):
// under PIPE_BUF, so the write into the FIFO is one and cannot block.
const smallPrompt = 4096

// warmDigest digests what is baked into the process at its start.
func warmDigest(w warmTurn) string { return harness.WarmDigest(w.args, w.env) }

// newSessionID returns a random UUID (version 4) for --session-id.
func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
