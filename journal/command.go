package journal

import (
	"github.com/d10ffeed/corral/sandbox"
)

// NonceEnv is the variable that carries the nonce to the wrapper when it
// cannot be written to the wrapper's stdin. The wrapper unsets it before
// the agent starts.
const NonceEnv = "CORRAL_JOURNAL_NONCE"

// wrapper runs the agent with its output journaled. Positional parameters:
// $1 dir, $2 journal, $3 err, $4 stdin file for the agent ("" for
// /dev/null), $5 "stdin" when the nonce arrives on stdin (else it is in
// NonceEnv), then the agent's argv.
//
//   - The journal's first line records the wrapper's pid.
//   - The agent runs in a subshell, so its own exit cannot skip the
//     sentinel; its stdout and stderr are redirected (never piped) and
//     appended (never truncated).
//   - An unterminated last line of the agent is ended with a newline, so
//     the sentinel is always a line of its own.
//   - The wrapper's own stdout and stderr go nowhere: when the process that
//     spawned it dies, nothing can SIGPIPE it.
const wrapper = `exec >/dev/null 2>&1
cj_dir=$1 cj_out=$2 cj_err=$3 cj_in=$4 cj_mode=$5
shift 5
if [ "$cj_mode" = stdin ]; then IFS= read -r cj_nonce; else cj_nonce=$` + NonceEnv + `; fi
unset ` + NonceEnv + `
[ -n "$cj_in" ] || cj_in=/dev/null
mkdir -p "$cj_dir" || exit 1
printf '{"__start":%d}\n' "$$" >>"$cj_out"
( exec "$@" <"$cj_in" >>"$cj_out" 2>>"$cj_err" )
cj_rc=$?
# The sentinel must be a line of its own: end an unterminated last line.
[ -z "$(tail -c 1 "$cj_out")" ] || printf '\n' >>"$cj_out"
printf '{"__exit":%d,"__nonce":"%s"}\n' "$cj_rc" "$cj_nonce" >>"$cj_out"
`

// Spec describes a journaled agent.
type Spec struct {
	Paths Paths
	Nonce string
	// Agent is the command to journal (argv or shell). Its Dir and Env are
	// those of the wrapper and so of the agent.
	Agent sandbox.Command
	// StdinFile, when set, is a path inside the sandbox fed to the agent's
	// stdin (a prompt file); otherwise the agent reads /dev/null.
	StdinFile string
}

// Command returns the wrapper command for spec. When nonceOnStdin is true
// the caller must write the nonce and a newline to the process's stdin
// (providers with writable stdin); otherwise the nonce travels in NonceEnv.
func Command(spec Spec, nonceOnStdin bool) (sandbox.Command, error) {
	if !ValidNonce(spec.Nonce) {
		return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "journal.command", spec.Paths.Token, "bad nonce")
	}
	if err := spec.Agent.Validate(); err != nil {
		return sandbox.Command{}, err
	}
	mode := "env"
	if nonceOnStdin {
		mode = "stdin"
	}
	args := append([]string{"sh", "-c", wrapper, "corral-journal", spec.Paths.Dir, spec.Paths.Journal, spec.Paths.Err, spec.StdinFile, mode}, spec.Agent.Argv()...)
	env := make(map[string]string, len(spec.Agent.Env)+1)
	for k, v := range spec.Agent.Env {
		env[k] = v
	}
	if !nonceOnStdin {
		env[NonceEnv] = spec.Nonce
	}
	return sandbox.Command{Args: args, Dir: spec.Agent.Dir, Env: env}, nil
}
