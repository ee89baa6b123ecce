package opencode

// Warm sessions (option warm=true, server mode): the thread's `opencode
// serve` stays running in the sandbox between its runs, and each run's
// serve-client.js connects to it and posts the next prompt to the same
// session instead of starting a server.
//
//   - The keeper: Prepare (through the handle, never under a run's journal
//     wrapper, so no run's process scope claims it) starts `opencode serve
//     --port 0 --hostname 127.0.0.1 [Request.Args...]` under setsid in a
//     per-thread directory beside the journals (0700, outside the
//     workspace), with a password of its own. The directory records the
//     server's pid, URL, password (0600) and the digest of what is baked
//     into it at its start: argv, the environment (the policy's
//     OPENCODE_CONFIG_CONTENT, secrets, hashed) and the checksum of the
//     run's opencode.json, which is copied into the directory
//     (OPENCODE_CONFIG points at that copy, so the server never reads a
//     run's directory after the run).
//   - Each turn's journaled command is serve-client.js with cfg.warm: it
//     checks the server is the one Prepare found, marks itself busy,
//     resumes or creates the session through the server's API, posts the
//     prompt and journals the events as a cold client does, and leaves the
//     server running at its end. Live approvals are the client's, per turn
//     (its serve.json, answer key and answers file are the run's), so they
//     work on warm turns as on cold ones.
//   - Cancel: the client's signal handler kills the server's whole
//     session, so nothing survives the cancel and the next turn starts a
//     new server, which resumes the session.
//   - Fallback: no live server, a digest that differs, or a client that
//     died mid-turn (its busy file names a dead pid): Prepare kills what is
//     left and starts a new server; the client resumes Request.Session on
//     it (OpenCode keeps sessions on disk). A server busy with another live
//     turn of the thread, or a sandbox without setsid, runs cold (a client
//     with a server of its own).

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// OptWarm is the option that keeps the server-mode `opencode serve`
// running between a thread's runs ("true"; default "false"; it needs
// mode=server).
const OptWarm = harness.OptWarm

// WarmDirPrefix begins the name of a thread's server directory, beside the
// run journals (path.Dir of Request.RunDir).
const WarmDirPrefix = "opencode-warm-"

// Warm reports whether the options ask for a warm session
// (harness.Warmer): warm=true in server mode. The runner then gives the
// turn no per-run agent tools, which the kept server would still hold
// after the run.
func (Harness) Warm(options map[string]string) bool {
	return options[OptMode] == ModeServer && harness.WarmOption(options)
}

var _ harness.Warmer = Harness{}

// clientWarm tells serve-client.js which kept server to use.
type clientWarm struct {
	Dir string `json:"dir"`
	Pid int    `json:"pid"`
}

// ensureServer checks the thread's kept server and starts a new one when
// it cannot serve the turn. Args: dir, digest, the run's opencode.json,
// then the server's argv. Env CORRAL_WARM_PASSWORD: the password for a
// new server (unset before anything runs). Prints "warm PID", "started
// PID", "busy" or "unsupported".
const ensureServer = `d=$1 dg=$2 cf=$3; shift 3
pw=$CORRAL_WARM_PASSWORD; unset CORRAL_WARM_PASSWORD OPENCODE_SERVER_USERNAME
` + harness.WarmAliveSh + `warm_extra() { [ -s "$d/url" ] && [ -s "$d/password" ]; }
` + harness.WarmCheckSh + `rm -f "$d/url" "$d/password" "$d/err"
[ -n "$pw" ] || { echo "no password for the warm server" >&2; exit 1; }
cp "$cf" "$d/opencode.json" && printf '%s' "$pw" >"$d/password" && printf '%s\n' "$dg" >"$d/digest" && : >"$d/log" || exit 1
OPENCODE_SERVER_PASSWORD=$pw setsid "$@" </dev/null >>"$d/log" 2>>"$d/err" &
p=$!
echo "$p" >"$d/pid"
i=0
while :; do
  u=$(grep -oE 'listening on https?://[^ ]+' "$d/log" 2>/dev/null | head -n 1)
  [ -n "$u" ] && break
  alive "$p" || { rm -f "$d/pid"; echo "the warm opencode server exited at start: $(tail -c 1000 "$d/err" 2>/dev/null)" >&2; exit 1; }
  i=$((i+1))
  [ $i -lt 2400 ] || { kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; rm -f "$d/pid"; echo "the warm opencode server printed no address in 120s" >&2; exit 1; }
  sleep 0.05
done
printf '%s\n' "${u#listening on }" >"$d/url"
echo "started $p"
`

// warmServer is what ensureWarm needs from Prepare.
type warmServer struct {
	exe    string
	auth   harness.Auth
	env    map[string]string // the run's environment; OPENCODE_CONFIG is replaced
	config []byte            // the run's opencode.json
}

// ensureWarm ensures the thread's kept server; nil means the turn runs
// cold (busy, or a sandbox without setsid).
func ensureWarm(ctx context.Context, h sandbox.Handle, req harness.Request, w warmServer) (*clientWarm, error) {
	const op = "harness.opencode.warm"
	dir := harness.WarmDir(req, WarmDirPrefix)
	env := make(map[string]string, len(w.env)+1)
	for k, v := range w.env {
		env[k] = v
	}
	env["OPENCODE_CONFIG"] = path.Join(dir, "opencode.json")
	args := []string{w.exe, "serve", "--port", "0", "--hostname", "127.0.0.1"}
	args = append(args, req.Args...)
	if w.auth == harness.AuthHost {
		pre := []string{"env"}
		for _, k := range ProviderKeyEnv {
			pre = append(pre, "-u", k)
			delete(env, k)
		}
		args = append(pre, args...)
	}
	sum := sha256.Sum256(w.config)
	digest := harness.WarmDigest(args, env, "opencode.json:"+hex.EncodeToString(sum[:]))
	pw := make([]byte, 24)
	_, _ = rand.Read(pw)
	senv := make(map[string]string, len(env)+1)
	for k, v := range env {
		senv[k] = v
	}
	senv["CORRAL_WARM_PASSWORD"] = hex.EncodeToString(pw)
	script := []string{"sh", "-c", ensureServer, "corral-opencode-warm", dir, digest, path.Join(req.RunDir, "opencode.json")}
	res, err := h.Exec(ctx, sandbox.Command{Args: append(script, args...), Env: senv})
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if res.ExitCode != 0 {
		return nil, sandbox.Errorf(sandbox.Internal, op, req.RunID, "starting the warm server exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	pid, _, ok, err := harness.ParseWarmCheck(res.Stdout)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if !ok {
		return nil, nil
	}
	return &clientWarm{Dir: dir, Pid: pid}, nil
}
