package journal

import (
	"path"
	"slices"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// NonceEnv is the variable that carries the nonce to the wrapper when it
// cannot be written to the wrapper's stdin. The wrapper unsets it before
// the agent starts.
const NonceEnv = "CORRAL_JOURNAL_NONCE"

// wrapper runs the agent with its output journaled. Positional parameters:
// $1 dir, $2 journal, $3 err, $4 stdin for the agent (a file, "-" for the
// rest of the wrapper's own stdin, "" for /dev/null), $5 "stdin" when the
// nonce arrives as the first line of stdin (else it is in NonceEnv), $6
// "diff" to record the working tree's diff (or "gate=PATH": the same, its
// baseline taken beside the agent while PATH exists; see Spec.DiffGate),
// $7 the run's file token, $8
// flags (space-separated: "own" when the sandbox has a process table of its
// own, "keep" to keep the run's background processes, "nocgroup" to make no
// cgroup, "born" when it was started in the run's cgroup), then the agent's
// argv.
//
//   - The journal's first line records the wrapper's pid.
//   - The agent runs in a subshell, so its own exit cannot skip the
//     sentinel; its stdout and stderr are redirected (never piped) and
//     appended (never truncated).
//   - An unterminated last line of the agent is ended with a newline, so
//     the sentinel is always a line of its own.
//   - In a git work tree, the tree is recorded before the agent starts (in
//     a private index: the user's index is untouched) and diffed after it
//     exits, new untracked files included; the diff goes into the journal,
//     authenticated by the nonce, before the sentinel. With a gate, the
//     tree is recorded beside the agent's start instead, the gate file
//     (holding the wrapper's pid) present until it is done.
//   - The agent runs in the run's process scope (see scope.go): a cgroup
//     of its own where the sandbox allows, the RunMarkerEnv marker always.
//     When it exits, whatever it left running is killed (unless
//     Spec.KeepBackground), before the diff and the sentinel.
//   - The wrapper's own stdout and stderr go nowhere: when the process that
//     spawned it dies, nothing can SIGPIPE it.
const wrapper = `exec >/dev/null 2>&1
cj_dir=$1 cj_out=$2 cj_err=$3 cj_in=$4 cj_mode=$5 cj_diff=$6 cj_tok=$7 cj_flags=$8 cj_gate=
shift 8
case $cj_diff in gate=/*) cj_gate=${cj_diff#gate=} cj_diff=diff ;; esac
if [ "$cj_mode" = stdin ]; then IFS= read -r cj_nonce; else cj_nonce=$` + NonceEnv + `; fi
unset ` + NonceEnv + `
[ -d "$cj_dir" ] || mkdir -p "$cj_dir" || exit 1
` + startLine + `
` + scopeFns + `
cj_own= cj_keep= cj_nocg= cj_born=
case " $cj_flags " in *" own "*) cj_own=own ;; esac
case " $cj_flags " in *" keep "*) cj_keep=keep ;; esac
case " $cj_flags " in *" nocgroup "*) cj_nocg=1 ;; esac
cj_t0=$cj_t cj_pre=
if [ -n "$cj_own" ]; then
  cj_pre=$(cs_initkids)
  printf '%s\n' "$cj_pre" >"$cj_out.pre" 2>/dev/null
fi
cj_cg= cs_root=
[ -z "$cj_nocg" ] && cs_v2root
if [ -n "$cs_root" ]; then
  cs_cgof $$
  # Started in the run's cgroup (flag born): it is the wrapper's own,
  # corral-TOKEN-N; else the wrapper makes corral-TOKEN-PID beside its own.
  case " $cj_flags " in *" born "*)
    case ${cs_cgp##*/} in "corral-$cj_tok-"[0-9]*) cj_born=1 cj_cg=$cs_root$cs_cgp ;; esac ;;
  esac
  if [ -z "$cj_born" ]; then
    cj_cg=$cs_root${cs_cgp%/}/corral-$cj_tok-$$
    mkdir "$cj_cg" 2>/dev/null || cj_cg=
  fi
fi
# The agent's subshell joins the run's cgroup (where there is one) and
# carries the run's marker, before it becomes the agent. A wrapper started
# in the cgroup forks the subshell in it, with no migration (which waits
# for an RCU grace period on a host that made none lately), unless a
# cancel moved the wrapper out first: the subshell then joins.
cj_enter() {
  if [ -n "$cj_born" ]; then
    cs_cgof self
    [ "$cs_root$cs_cgp" = "$cj_cg" ] || echo 0 >"$cj_cg/cgroup.procs" 2>/dev/null
  elif [ -n "$cj_cg" ]; then
    echo 0 >"$cj_cg/cgroup.procs" 2>/dev/null
  fi
  export ` + RunMarkerEnv + `="$cj_tok:$$"
}
cj_tree=
# git runs only where a .git could make this a work tree (or GIT_DIR is
# set): the walk up uses built-ins, so a plain directory costs no process.
cj_ingit() {
  [ -n "${GIT_DIR-}" ] && return 0
  cj_d=. cj_i=0
  while [ $cj_i -lt 128 ]; do
    [ -e "$cj_d/.git" ] && return 0
    [ "$cj_d" -ef "$cj_d/.." ] && return 1
    cj_d=$cj_d/.. cj_i=$((cj_i+1))
  done
  return 0
}
# A .git directory found by the walk is the git dir (one process less on
# every run's path); a .git file (worktree, submodule) or GIT_DIR asks git.
cj_gitdir() {
  if [ -z "${GIT_DIR-}" ] && [ -d "$cj_d/.git" ] && [ -f "$cj_d/.git/index" ]; then cj_git=$cj_d/.git; return 0; fi
  cj_git=$(git rev-parse --git-dir 2>/dev/null)
}
# The baseline is the private index after git add -A: it holds the id of
# every file's content as the run starts, so its tree is written at the
# end, off the agent's start (one process less before the agent runs).
# With a gate, the baseline is taken in the background while the agent
# starts: the gate file, made first, names this wrapper, and goes when the
# baseline is done; the agent's steps that change files wait for that
# (Spec.DiffGate). An asynchronous list's stdin is /dev/null: the agent's
# input stays its own.
cj_base= cj_bp=
if [ "$cj_diff" = diff ] && cj_ingit && cj_gitdir; then
  cj_idx=$cj_dir/.index.$$
  if [ -n "$cj_gate" ] && printf '%s\n' $$ >"$cj_gate" 2>/dev/null; then
    ( cp "$cj_git/index" "$cj_idx" 2>/dev/null; GIT_INDEX_FILE=$cj_idx git add -A .; cj_s=$?; rm -f "$cj_gate"; exit $cj_s ) &
    cj_bp=$!
  else
    cp "$cj_git/index" "$cj_idx" 2>/dev/null
    GIT_INDEX_FILE=$cj_idx git add -A . && cj_base=1 || rm -f "$cj_idx"
  fi
fi
case $cj_in in
-) ( cj_enter; exec "$@" >>"$cj_out" 2>>"$cj_err" ) ;;
'') ( cj_enter; exec "$@" </dev/null >>"$cj_out" 2>>"$cj_err" ) ;;
*) ( cj_enter; exec "$@" <"$cj_in" >>"$cj_out" 2>>"$cj_err" ) ;;
esac
cj_rc=$?
# The background baseline ends before anything is killed: it is not the
# agent's, and the diff needs it.
if [ -n "$cj_bp" ]; then
  if wait "$cj_bp"; then cj_base=1; else rm -f "$cj_idx"; fi
fi
# Nothing the run started outlives it (unless it keeps its background
# processes): everything left in its scope is killed before the diff and
# the sentinel, so no process of the run can write after the sentinel.
# A wrapper started in the cgroup is still in it: when nothing but itself
# is left there and no process carrying the marker escaped it, the kill
# is done (the daemon removes the cgroup once the wrapper exits); else it
# leaves the cgroup (to its parent), so the cgroup's kill spares it, and
# kills as any wrapper does. One that cannot leave kills by the other
# rules only.
if [ -z "$cj_keep" ] && [ -n "$cj_born" ]; then
  cj_others=
  while IFS= read -r cs_p; do [ "$cs_p" = "$$" ] || { cj_others=1; break; }; done <"$cj_cg/cgroup.procs" 2>/dev/null
  if [ -n "$cj_others" ] || cs_escaped "$cj_tok:$$" "$$"; then
    echo $$ >"${cj_cg%/*}/cgroup.procs" 2>/dev/null
    cs_cgof $$
    [ "$cs_root$cs_cgp" = "$cj_cg" ] && cj_cg=
    cj_born=
  fi
fi
if [ -z "$cj_keep" ] && [ -z "$cj_born" ]; then
  cs_kill "$cj_tok:$$" "$cj_cg" "$cj_own" "$cj_t0" "$$" 0 "$cj_pre"
  if [ -n "$cj_cg" ]; then
    cj_i=0
    while ! rmdir "$cj_cg" 2>/dev/null && [ $cj_i -lt 20 ]; do sleep 0.05; cj_i=$((cj_i+1)); done
  fi
fi
` + endLine + `
if [ -n "$cj_base" ]; then
  cj_tree=$(GIT_INDEX_FILE=$cj_idx git write-tree) || cj_tree=
fi
if [ -n "$cj_tree" ]; then
  cj_end=$(GIT_INDEX_FILE=$cj_idx git add -A . && GIT_INDEX_FILE=$cj_idx git write-tree)
  if [ "$cj_end" = "$cj_tree" ]; then
    # The same tree: the diff is empty, known without the two git diff
    # pipelines (seven processes at the end of every run that changed
    # nothing, as most chat turns).
    printf '{"__diff":"","__truncated":false,"__nonce":"%s"}\n' "$cj_nonce" >>"$cj_out"
  elif [ -n "$cj_end" ]; then
    cj_size=$(git diff --binary "$cj_tree" "$cj_end" | wc -c | tr -d ' ')
    cj_cut=false
    [ "$cj_size" -gt ` + maxDiffText + ` ] && cj_cut=true
    printf '{"__diff":"%s","__truncated":%s,"__nonce":"%s"}\n' \
      "$(git diff --binary "$cj_tree" "$cj_end" | head -c ` + maxDiffText + ` | base64 | tr -d '\n')" "$cj_cut" "$cj_nonce" >>"$cj_out"
  fi
fi
[ -n "$cj_base" ] && rm -f "$cj_idx"
printf '{"__exit":%d,"__nonce":"%s"}\n' "$cj_rc" "$cj_nonce" >>"$cj_out"
`

const maxDiffText = "1048576"

// Spec describes a journaled agent.
type Spec struct {
	Paths Paths
	Nonce string
	// Agent is the command to journal (argv or shell). Its Dir and Env are
	// those of the wrapper and so of the agent.
	Agent sandbox.Command
	// Stdin, when set, is the agent's standard input. Start writes it to
	// the process where the provider's stdin is writable, else to
	// Paths.In, which is redirected into the agent.
	Stdin []byte
	// Diff records the working tree's diff in the journal after the agent
	// exits (in a git work tree).
	Diff bool
	// DiffGate, when set with Diff, is an absolute path the wrapper creates
	// (holding its pid) before the agent starts and removes once the
	// working tree's starting state is recorded, which it then does
	// beside the agent instead of before it. Only for an agent that
	// changes files only through steps that wait while the path exists
	// and its pid lives (Claude Code's PreToolUse hook): anything else
	// could change a file before the baseline has it.
	DiffGate string
	// KeepBackground keeps the processes the agent left running when it
	// exits (servers for the thread's next run). By default they are
	// killed, whatever they did to leave the agent's tree. A cancel kills
	// them either way.
	KeepBackground bool
	// OwnProcessTable says the sandbox's process table is its own
	// (Capabilities.OwnProcessTable): processes re-parented to its init
	// after the run started are the run's. Start sets it from the handle.
	OwnProcessTable bool
	// NoCgroup makes the wrapper skip the run's cgroup even where it could
	// make one (tests of the fallback use it).
	NoCgroup bool
	// Shell is the argv prefix that runs the wrapper's text in place of
	// "sh" (a sandbox.ScriptShell's). The agent's program must then be an
	// absolute path, so that none of the shell's applets stands in for it:
	// Command refuses a name without a slash. Start sets it from the
	// handle where the agent's program resolves.
	Shell []string

	// born says the wrapper is started in the run's cgroup (spawnWrapper):
	// it then finds the cgroup as its own instead of making one.
	born bool
}

// Command returns the wrapper command for spec. When nonceOnStdin is true
// the caller must write the nonce and a newline to the process's stdin
// (providers with writable stdin), followed by spec.Stdin; otherwise the
// nonce travels in NonceEnv and spec.Stdin must already be in Paths.In.
func Command(spec Spec, nonceOnStdin bool) (sandbox.Command, error) {
	if !ValidNonce(spec.Nonce) {
		return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "journal.command", spec.Paths.Token, "bad nonce")
	}
	if err := spec.Agent.Validate(); err != nil {
		return sandbox.Command{}, err
	}
	mode, in, diff := "env", "", ""
	if nonceOnStdin {
		mode = "stdin"
	}
	switch {
	case len(spec.Stdin) > 0 && nonceOnStdin:
		in = "-"
	case len(spec.Stdin) > 0:
		in = spec.Paths.In
	}
	if spec.Diff {
		diff = "diff"
		if spec.DiffGate != "" {
			if !path.IsAbs(spec.DiffGate) || strings.ContainsAny(spec.DiffGate, "\n\x00") {
				return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "journal.command", spec.Paths.Token, "the diff gate %q is not an absolute path", spec.DiffGate)
			}
			diff = "gate=" + path.Clean(spec.DiffGate)
		}
	}
	var flags []string
	if spec.OwnProcessTable {
		flags = append(flags, "own")
	}
	if spec.KeepBackground {
		flags = append(flags, "keep")
	}
	if spec.NoCgroup {
		flags = append(flags, "nocgroup")
	}
	if spec.born {
		flags = append(flags, "born")
	}
	shell := []string{"sh"}
	if len(spec.Shell) > 0 {
		if p := spec.Agent.Argv()[0]; !strings.Contains(p, "/") {
			return sandbox.Command{}, sandbox.Errorf(sandbox.InvalidArgument, "journal.command", spec.Paths.Token, "with a script shell the agent's program must be a path, not %q", p)
		}
		shell = spec.Shell
	}
	args := append(slices.Clip(shell), "-c", wrapper, "corral-journal", spec.Paths.Dir, spec.Paths.Journal, spec.Paths.Err, in, mode, diff, spec.Paths.Token, strings.Join(flags, " "))
	args = append(args, spec.Agent.Argv()...)
	env := make(map[string]string, len(spec.Agent.Env)+1)
	for k, v := range spec.Agent.Env {
		env[k] = v
	}
	if !nonceOnStdin {
		env[NonceEnv] = spec.Nonce
	}
	return sandbox.Command{Args: args, Dir: spec.Agent.Dir, Env: env}, nil
}
