package harness

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
)

// Helpers shared by the harnesses that keep an agent's process running
// between a thread's runs (warm sessions: claudecode, codex).

// KeeperAlive is a POSIX sh function for the keeper scripts: `alive PID`
// succeeds when kill -0 reaches the pid and /proc (where there is one)
// does not show it a zombie.
const KeeperAlive = `alive() { kill -0 "$1" 2>/dev/null || return 1; [ -r "/proc/$1/stat" ] || return 0; case $(cut -d')' -f2 <"/proc/$1/stat") in " Z"*|" X"*) return 1 ;; esac; }
`

// KeeperDigest digests what is baked into a kept process at its start:
// its argv, its environment (secrets included, hashed) and any further
// values (configuration files, start requests), each length-prefixed.
func KeeperDigest(args []string, env map[string]string, extra ...string) string {
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
