package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Helpers shared by the warm sessions of the harnesses that keep their
// agent's process between a thread's runs (claude-code's and opencode's
// option warm=true): the per-thread keeper directory, the digest of what
// is baked into the kept process, the shell liveness test and the keeper
// check's answer.

// OptWarm is the option that keeps the agent's process running between a
// thread's runs ("true"; default "false"), for the harnesses that
// implement Warmer.
const OptWarm = "warm"

// WarmOption reports whether options ask for a warm session: OptWarm
// parses as true. A malformed value is not warm (ParseWarmOption says
// why).
func WarmOption(options map[string]string) bool {
	warm, err := ParseWarmOption(options)
	return err == nil && warm
}

// ParseWarmOption parses OptWarm (absent: false).
func ParseWarmOption(options map[string]string) (bool, error) {
	v := strings.TrimSpace(options[OptWarm])
	if v == "" {
		return false, nil
	}
	return strconv.ParseBool(v)
}

// WarmDir is the keeper directory of req's thread: prefix and a hash of
// the thread, beside the run journals (path.Dir of Request.RunDir), so
// outside the workspace.
func WarmDir(req Request, prefix string) string {
	sum := sha256.Sum256([]byte(req.ThreadID))
	return path.Join(path.Dir(req.RunDir), prefix+hex.EncodeToString(sum[:8]))
}

// WarmDigest digests what is baked into a kept process at its start: its
// argv, its environment (secrets included, hashed) and any extra strings
// (a configuration file's checksum, say). A keeper whose recorded digest
// differs from the turn's is replaced.
func WarmDigest(args []string, env map[string]string, extra ...string) string {
	h := sha256.New()
	for _, a := range args {
		fmt.Fprintf(h, "a%d:%s\n", len(a), a)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "e%d:%s=%d:%s\n", len(k), k, len(env[k]), env[k])
	}
	for _, x := range extra {
		fmt.Fprintf(h, "x%d:%s\n", len(x), x)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WarmAliveSh defines the shell function alive PID for keeper checks and
// turn clients: the process exists and is not a zombie by
// /proc/PID/stat where there is one (a keeper's parent is often a
// container's init, which may not reap it), with builtins only, so a warm
// turn forks nothing to ask. A reused pid passes.
const WarmAliveSh = `alive() { kill -0 "$1" 2>/dev/null || return 1; [ -r "/proc/$1/stat" ] || return 0; read -r _st <"/proc/$1/stat" || return 0; case ${_st##*) } in Z*|X*) return 1 ;; esac; }
`

// WarmCheckSh is the start of a keeper check shared by the warm harnesses,
// after WarmAliveSh, with $d the keeper directory and $dg the turn's
// digest: it prints "unsupported" without setsid or mkfifo, "busy" while
// the busy file names a live turn client, and "warm PID" for a live keeper
// of the same digest whose last turn ended (exiting 0 each time); else it
// kills what is left of the keeper (its whole session) and removes its
// files, and the script goes on to start a new one.
const WarmCheckSh = `command -v setsid >/dev/null 2>&1 && command -v mkfifo >/dev/null 2>&1 || { echo unsupported; exit 0; }
umask 077; mkdir -p "$d" || exit 1
p=$(cat "$d/pid" 2>/dev/null) b=$(cat "$d/busy" 2>/dev/null)
if [ -n "$p" ] && alive "$p"; then
  if [ -n "$b" ] && alive "$b"; then echo busy; exit 0; fi
  if [ -z "$b" ] && [ "$(cat "$d/digest" 2>/dev/null)" = "$dg" ] && warm_extra; then echo "warm $p"; exit 0; fi
  kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
fi
rm -f "$d/busy" "$d/pid" "$d/log"
`

// ParseWarmCheck reads a keeper check's output: the keeper's pid and
// whether it was started now ("started PID") rather than found ("warm
// PID"); ok false (busy, unsupported) means the turn runs cold.
func ParseWarmCheck(stdout []byte) (pid int, started, ok bool, err error) {
	out := strings.Fields(string(stdout))
	if len(out) != 2 || (out[0] != "warm" && out[0] != "started") {
		return 0, false, false, nil
	}
	pid, err = strconv.Atoi(out[1])
	if err != nil || pid <= 0 {
		return 0, false, false, fmt.Errorf("the warm process check printed %q", stdout)
	}
	return pid, out[0] == "started", true, nil
}
