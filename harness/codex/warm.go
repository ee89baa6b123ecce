package codex

// Warm sessions (option warm=true): one `codex app-server` per thread
// stays running in the sandbox between the thread's runs, speaking its
// JSON-RPC protocol over stdio, so a next turn skips the CLI's start.
//
//   - The keeper: Prepare (through the handle, never under a run's journal
//     wrapper, so no run's process scope claims it) starts `codex
//     app-server` under setsid, stdin from a FIFO it holds open read-write
//     itself, stdout appended to a session log, in a per-thread directory
//     beside the journals (0700, outside the workspace). The start sends
//     initialize, initialized and thread/resume (the thread's codex thread,
//     when there is one) or thread/start, once. The directory records the
//     keeper's pid, the digest of everything baked into the process at its
//     start (argv, environment, config.toml, the thread request, the
//     AGENTS.md checksum) and the codex thread it serves.
//   - Each turn's journaled command is the turn client (turnClient): the
//     turn/start request on its stdin (a unique request id per run), it
//     checks the keeper is the one Prepare found, notes the log's size,
//     writes the request into the FIFO and relays the log from there to
//     that turn's turn/completed notification, exiting 0, or 1 when the
//     request failed or the keeper died. The journal wrapper wraps it as
//     any agent, so the turn is journaled, taken over and delivered exactly
//     once as a cold one; the translator reads the app-server's
//     notifications (translate_app.go).
//   - Cancel: the client's SIGTERM trap kills the keeper's whole session
//     (codex 0.171's turn/interrupt ends the turn but not the command it
//     runs), so nothing of the turn survives and the next turn starts a
//     new keeper with thread/resume.
//   - Fallback: no live keeper, a digest or thread that differs, or a turn
//     client that died mid-turn (its busy file names a dead pid): Prepare
//     kills what is left and starts a new keeper that resumes the thread.
//     A keeper busy with another live turn of the thread, a sandbox
//     without setsid or mkfifo, host auth, or a turn that needs per-run
//     files the process would read after the run (MCP servers, projected
//     skills, command rules) or extra CLI arguments runs cold.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// OptWarm is the option that keeps `codex app-server` running between a
// thread's runs ("true"; default "false").
const OptWarm = harness.OptWarm

// Warm reports whether the options ask for a warm session
// (harness.Warmer): the runner then gives the turn no per-run agent tools,
// which the kept process would still hold after the run.
func (Harness) Warm(options map[string]string) bool {
	return harness.WarmOption(options)
}

var _ harness.Warmer = Harness{}

// WarmDirPrefix begins the name of a thread's keeper directory, beside the
// run journals (path.Dir of Request.RunDir).
const WarmDirPrefix = "codex-warm-"

// warmDir is the keeper directory of a thread.
func warmDir(req harness.Request) string { return harness.WarmDir(req, WarmDirPrefix) }

// ensureKeeper checks the thread's keeper and starts a new one when it
// cannot serve the turn. Args: dir, digest, codex thread to resume (or
// ""), the sessions directory (or ""), config.toml, the thread/resume
// request, the thread/start request, then the app-server argv. Prints
// "warm PID THREAD", "started PID THREAD [resume_failed]", "busy" or
// "unsupported".
const ensureKeeper = harness.WarmAliveSh + warmHomeSh + `d=$1 dg=$2 thr=$3 ses=$4 cfg=$5 rq=$6 sq=$7; shift 7
command -v setsid >/dev/null 2>&1 && command -v mkfifo >/dev/null 2>&1 && [ -d /proc/self/fd ] || { echo unsupported; exit 0; }
[ -f AGENTS.md ] && dg="$dg $(cksum <AGENTS.md)"
umask 077; mkdir -p "$d" || exit 1
p=$(cat "$d/pid" 2>/dev/null) b=$(cat "$d/busy" 2>/dev/null)
if [ -n "$p" ] && alive "$p"; then
  if [ -n "$b" ] && alive "$b"; then echo busy; exit 0; fi
  if [ -z "$b" ] && [ -n "$thr" ] && [ "$(cat "$d/digest" 2>/dev/null)" = "$dg" ] && [ "$(cat "$d/thread" 2>/dev/null)" = "$thr" ]; then echo "warm $p $thr"; exit 0; fi
  kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
fi
rm -f "$d/in" "$d/busy" "$d/pid" "$d/log" "$d/thread" "$d/relay".*
rmhome
# CODEX_HOME: a fresh directory per keeper (so no other keeper, of this
# thread or another, ever finds one left behind), in the keeper directory
# except where codex's bwrap sandbox would hide it (it mounts a fresh /tmp
# over the helper links codex keeps there). One made outside records its
# keeper directory (owner); the start sweeps homes there whose keeper
# directory no longer names them, after ten minutes (a start of another
# thread may be between its mktemp and its record).
h=
if command -v bwrap >/dev/null 2>&1; then
  case "$d" in /tmp/*)
    for base in "${HOME:-}/.corral/codex/warm" /var/tmp/corral-codex-warm; do
      case "$base" in /.corral/*|/tmp/*) continue ;; esac
      mkdir -p "$base" 2>/dev/null && [ -w "$base" ] || continue
      find "$base" -mindepth 1 -maxdepth 1 -name 'codex-warm-*.*' -mmin +10 2>/dev/null | while IFS= read -r o; do
        ow=$(cat "$o/owner" 2>/dev/null)
        [ -n "$ow" ] && [ "$(cat "$ow/codex-home" 2>/dev/null)" = "$o" ] || rm -rf "$o"
      done
      h=$(mktemp -d "$base/${d##*/}.XXXXXXXX") || continue
      printf '%s\n' "$d" >"$h/owner"; break
    done ;;
  esac
fi
[ -n "$h" ] || h=$(mktemp -d "$d/home.XXXXXXXX") || exit 1
printf '%s\n' "$h" >"$d/codex-home" && chmod 700 "$h" && printf '%s' "$cfg" >"$h/config.toml" || exit 1
[ -n "$ses" ] || ses=${HOME:-}/.corral/codex/sessions
mkdir -p "$ses" && ln -sfn "$ses" "$h/sessions" || exit 1
mkfifo "$d/in" && : >"$d/log" || exit 1
printf '%s\n' "$dg" >"$d/digest"
export CODEX_HOME="$h"
setsid sh -c "$keeperSh" corral-codex-keeper "$d" "$h" "$@" </dev/null >/dev/null 2>&1 &
p=$!
echo "$p" >"$d/pid"
# Held open here until the thread answers: what is written before the
# keeper opens the FIFO stays in it.
exec 4<>"$d/in"
send() { printf '%s\n' "$1" >&4; }
answer() {
  i=0
  while ! grep -q "\"id\":\"$1\"" "$d/log"; do
    alive "$p" || { echo "the codex app-server exited at start: $(tail -c 1000 "$d/err" 2>/dev/null)" >&2; exit 1; }
    i=$((i+1)); [ $i -lt 1200 ] || { kill -KILL "-$p" 2>/dev/null; echo "the codex app-server did not answer $1 in 60s" >&2; exit 1; }
    sleep 0.05
  done
  grep "\"id\":\"$1\"" "$d/log" | head -n 1
}
answer_thread() { printf '%s\n' "$1" | grep '"result":' | grep -o '"thread":{"id":"[^"]*"' | head -n 1 | cut -d'"' -f6; }
send '{"id":"corral-init","method":"initialize","params":{"clientInfo":{"name":"corral","version":"1"}}}'
answer corral-init >/dev/null
send '{"method":"initialized"}'
t= note=
if [ -n "$thr" ]; then
  send "$rq"
  t=$(answer_thread "$(answer corral-resume)")
  [ -n "$t" ] || note=resume_failed
fi
if [ -z "$t" ]; then
  send "$sq"
  a=$(answer corral-start)
  t=$(answer_thread "$a")
  [ -n "$t" ] || { kill -KILL "-$p" 2>/dev/null; echo "thread/start failed: $a" >&2; exit 1; }
fi
printf '%s\n' "$t" >"$d/thread"
# The FIFO's name goes: from here on the app-server's input is reachable
# only through its keeper's fd 3 (/proc/PID/fd/3), which the agent's
# commands in codex's own sandbox cannot open (seen: a read-only sandbox
# still lets them write a FIFO in the keeper directory, and the
# app-server answers what they write: fs/writeFile, turn/start with
# another sandboxPolicy).
rm -f "$d/in"
echo "started $p $t $note"
`

// warmHomeSh defines, for the keeper check and the turn client ($d the
// keeper directory), keeperSh, the keeper's own shell under setsid (args:
// the directory, its CODEX_HOME, the app-server argv), which removes its
// CODEX_HOME when the app-server exits or it is signalled (SIGTERM: a
// local sandbox's destroy), and rmhome, which removes the CODEX_HOME the
// directory records, only one a keeper check made ($d/home.XXXXXXXX, or
// <base>/<directory name>.XXXXXXXX), for a keeper killed with SIGKILL.
const warmHomeSh = `keeperSh='d=$1 h=$2; shift 2
trap "rm -rf \"\$h\"; exit 143" TERM HUP INT
exec 3<>"$d/in"
"$@" <&3 >>"$d/log" 2>"$d/err"
st=$?
rm -rf "$h"
printf "{\"method\":\"corral/keeperExited\",\"params\":{\"exit\":%d}}\n" $st >>"$d/log"'
rmhome() {
  _o=$(cat "$d/codex-home" 2>/dev/null)
  case "$_o" in "$d"/home.????????|*/.corral/codex/warm/"${d##*/}".????????|/var/tmp/corral-codex-warm/"${d##*/}".????????) rm -rf "$_o" ;; esac
  rm -f "$d/codex-home"
}
`

// turnClient is a warm turn's journaled command. Args: dir, keeper pid,
// codex thread, the turn/start request id, a note line to print first (or
// ""). Stdin: the turn/start request line.
const turnClient = harness.WarmAliveSh + warmHomeSh + `d=$1 kp=$2 thr=$3 rid=$4 note=$5
[ -n "$note" ] && printf '%s\n' "$note"
if [ "$(cat "$d/pid" 2>/dev/null)" != "$kp" ] || ! alive "$kp"; then
  echo "corral: the warm codex app-server $kp is gone" >&2; exit 1
fi
echo $$ >"$d/busy"
r="$d/relay.$$" tp= wp= cp=
off=$(wc -c <"$d/log")
# codex 0.171's turn/interrupt ends the turn but leaves its running
# command alive (seen: a "sleep 37" ran on), so a cancel kills the keeper's
# whole session and the next turn resumes the thread on a new one.
stop() {
  kill -KILL "-$kp" 2>/dev/null; kill -KILL "$kp" 2>/dev/null
  kill -KILL $tp $wp $cp 2>/dev/null; rmhome; rm -f "$d/busy" "$r"; exit 143
}
trap stop TERM INT HUP
mkfifo "$r" || exit 1
tail -c +$((off+1)) -f "$d/log" >"$r" 2>/dev/null &
tp=$!
# Opened read-write, the FIFO never blocks its opener; the request is
# written in the background, so a keeper that died cannot hold the turn.
# (An asynchronous command's stdin is /dev/null: the request goes by fd 5.)
exec 4<>"/proc/$kp/fd/3" 5<&0 || { rm -f "$r" "$d/busy"; kill $tp 2>/dev/null; echo "corral: the warm codex app-server's input is gone" >&2; exit 1; }
cat <&5 >&4 &
cp=$!
exec 4>&- 5<&-
( while alive "$kp"; do sleep 0.2; done; kill "$tp" "$cp" 2>/dev/null ) >/dev/null 2>&1 &
wp=$!
# mawk fills its input buffer before it reads a line, unless interactive.
aw=awk
case $(awk -W version 2>&1 </dev/null) in *mawk*) aw="awk -W interactive" ;; esac
$aw -v rid="$rid" '{ print; fflush() }
/^\{"method":"corral\/keeperExited"/ { exit }
turn == "" && index($0, "\"id\":\"" rid "\"") {
  if (index($0, "{\"id\":\"" rid "\",\"result\":") == 1 && match($0, /"turn":\{"id":"[^"]*"/)) {
    turn = substr($0, RSTART + 14, RLENGTH - 15); next
  }
  st = 1; done = 1; exit
}
turn != "" && /^\{"method":"turn\/completed"/ && index($0, "\"id\":\"" turn "\"") { st = 0; done = 1; exit }
END { if (!done) st = 1; exit st }' <"$r"
st=$?
kill "$tp" "$wp" "$cp" 2>/dev/null
rm -f "$r" "$d/busy"
if [ "$st" != 0 ] && [ -s "$d/err" ]; then tail -c 2000 "$d/err" >&2; fi
exit "$st"
`

// warmTurn is what prepareWarm needs from Prepare.
type warmTurn struct {
	args     []string // the app-server argv
	env      map[string]string
	config   []byte // the keeper's config.toml
	thread   string // the codex thread to resume, or ""
	sessions string // the lasting sessions directory (option), or ""
	params   map[string]any
}

// resumeNote is the journal line a turn gets when its thread could not be
// resumed and the keeper started a fresh one.
const resumeNote = `{"method":"corral/resumeFailed","params":{}}`

// prepareWarm returns the turn client's invocation, ensuring the keeper;
// ok false means the turn runs cold.
func prepareWarm(ctx context.Context, h sandbox.Handle, req harness.Request, w warmTurn) (harness.Invocation, bool, error) {
	const op = "codex.warm"
	dir := warmDir(req)
	resumeParams := map[string]any{"threadId": w.thread, "excludeTurns": true}
	for k, v := range w.params {
		resumeParams[k] = v
	}
	rq := jsonString(map[string]any{"id": "corral-resume", "method": "thread/resume", "params": resumeParams})
	sq := jsonString(map[string]any{"id": "corral-start", "method": "thread/start", "params": w.params})
	script := []string{"sh", "-c", ensureKeeper, "corral-codex-warm", dir, warmDigest(w, sq), w.thread, w.sessions, string(w.config), rq, sq}
	res, err := h.Exec(ctx, sandbox.Command{Args: append(script, w.args...), Env: w.env})
	if err != nil {
		return harness.Invocation{}, false, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if res.ExitCode != 0 {
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "starting the warm codex app-server exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	out := strings.Fields(string(res.Stdout))
	if len(out) < 3 || (out[0] != "warm" && out[0] != "started") {
		return harness.Invocation{}, false, nil // busy or unsupported: cold
	}
	if _, err := strconv.Atoi(out[1]); err != nil || !sessionIDRE.MatchString(out[2]) {
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "the warm codex check printed %q", res.Stdout)
	}
	note := ""
	if len(out) > 3 && out[3] == "resume_failed" {
		note = resumeNote
	}
	rid := "corral-turn-" + newRequestID()
	cmd := sandbox.Command{Args: []string{"sh", "-c", turnClient, "corral-codex-turn", dir, out[1], out[2], rid, note}}
	line := jsonString(map[string]any{"id": rid, "method": "turn/start", "params": map[string]any{
		"threadId": out[2], "input": []any{map[string]any{"type": "text", "text": req.Prompt, "text_elements": []any{}}},
	}})
	return harness.Invocation{Command: cmd, Stdin: []byte(line + "\n")}, true, nil
}

// warmDigest digests what is baked into the process at its start.
func warmDigest(w warmTurn, startRequest string) string {
	return harness.WarmDigest(w.args, w.env, string(w.config), startRequest, w.sessions)
}

// newRequestID returns a random id for a turn's turn/start request.
func newRequestID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// warmInputs is what Prepare has planned when it tries a warm turn.
type warmInputs struct {
	exe, baseURL, key string
	plan              policyPlan
	mcp               mcpPlan
	env               map[string]string
}

// tryWarm runs the turn on the thread's keeper when the options ask for
// it and nothing in the turn needs per-run files; ok false means cold.
func tryWarm(ctx context.Context, h sandbox.Handle, req harness.Request, in warmInputs) (harness.Invocation, bool, error) {
	warm, err := harness.ParseWarmOption(req.Options)
	if err != nil {
		return harness.Invocation{}, false, sandbox.Errorf(sandbox.InvalidArgument, "harness.codex", req.RunID, "option warm=%q: want true or false", req.Options[OptWarm])
	}
	if !warm || req.ThreadID == "" || len(in.mcp.servers) > 0 || len(in.plan.rules) > 0 || len(req.Args) > 0 {
		return harness.Invocation{}, false, nil
	}
	if skills, err := harness.FindSkills(ctx, h, req); err != nil {
		return harness.Invocation{}, false, err
	} else if len(skills) > 0 {
		return harness.Invocation{}, false, nil
	}
	args := []string{in.exe, "app-server", "-c", `approval_policy="never"`, "-c", "sandbox_mode=" + tomlString(in.plan.sandbox)}
	params := map[string]any{"approvalPolicy": "never", "sandbox": in.plan.sandbox}
	if in.plan.network != nil {
		args = append(args, "-c", "sandbox_workspace_write.network_access="+strconv.FormatBool(*in.plan.network))
	}
	if req.Model != "" {
		args = append(args, "-c", "model="+tomlString(req.Model))
		params["model"] = req.Model
	}
	if e := req.Options[OptReasoningEffort]; e != "" {
		args = append(args, "-c", "model_reasoning_effort="+tomlString(e))
	}
	env := make(map[string]string, len(in.env)+1)
	for k, v := range in.env {
		env[k] = v
	}
	env["CODEX_API_KEY"] = in.key
	thread := req.Session
	if !sessionIDRE.MatchString(thread) {
		thread = ""
	}
	return prepareWarm(ctx, h, req, warmTurn{args: args, env: env, config: configTOML(in.baseURL, in.mcp), thread: thread,
		sessions: req.Options[OptSessionsDir], params: params})
}
