package journal

// A run's process scope is every process the run started, however it left
// the wrapper's tree: double-forked, setsid, daemonized, fork-bombing. The
// shell below finds it and kills it; the wrapper runs it when the agent
// exits (unless the run keeps its background processes) and Kill runs it on
// cancel.
//
// Membership, strongest first:
//
//  1. A cgroup of the run's own (cgroup v2, corral-<token>-<wrapper pid>
//     beside the wrapper's, made by the wrapper where the sandbox lets it:
//     root on a host, a VM; or corral-<token>-<nine random digits>, made
//     by the daemon, which starts the wrapper in it where the handle can,
//     see spawnWrapper) holds the agent and everything it starts; leaving
//     it needs write access to the cgroup tree. It is frozen, then killed
//     whole (cgroup.kill, or SIGKILL per member), with the wrapper moved
//     out of it first where it was started in it.
//  2. The environment marker RunMarkerEnv=<token>:<wrapper pid>, inherited
//     by every descendant that does not clear its environment, matched as
//     a whole entry (two runs never share it, even with the same run id on
//     one host).
//  3. The process groups and sessions of members: a process whose group or
//     session id is the pid of a member (or of the wrapper) belongs to it,
//     so a double fork that keeps its group is found.
//  4. Where the sandbox has a process table of its own
//     (Capabilities.OwnProcessTable: a container or VM, never the host), a
//     process re-parented to the sandbox's init that started after the
//     wrapper, was not init's child when the wrapper started (the wrapper
//     records that list in <journal>.pre: the sandbox's main process may
//     start after it), and carries no other run's marker: this catches a
//     daemon that cleared its environment and left its session. Daemons
//     started before the run (by setup, say) are left alone.
//
// Where the run has its cgroup, the wrapper's kill once the agent exited
// (grace 0) is the cgroup first: it is killed until empty, with built-ins,
// then one grep looks for the marker; only when a live process still
// carries it (it moved itself out of the cgroup, as root can) do the other
// rules run (their scans cost a read per byte per process, for every
// process of a shared host table). A process that left the cgroup and
// cleared its environment is not found at the run's end; a cancel (Kill)
// applies every rule.
//
// Every member found is stopped at once (SIGSTOP), so a fork bomb cannot
// grow while the scan goes on; the scan repeats until it finds nobody new;
// then everything is killed and the kill is verified. The killing shell,
// its ancestors, the wrapper and pid 1 are never members. The scan uses
// only shell built-ins while it walks /proc, so its own helpers cannot be
// mistaken for members.

// RunMarkerEnv is the environment variable that marks every process of a
// run; its value is the run's file token and the wrapper's pid,
// "<token>:<pid>". The wrapper sets it for the agent; the scope kill finds
// processes by it.
const RunMarkerEnv = "CORRAL_RUN"

// scopeFns defines the shell functions of the scope kill:
//
//	cs_v2root          the first cgroup v2 mount (empty when none)
//	cs_cgof PID        the cgroup v2 path of PID, or of the calling process
//	                   for "self" ("/" for the root)
//	cs_stat FILE       parse /proc/PID/stat into cs_pid, cs_st, cs_pp,
//	                   cs_pg, cs_sid, cs_start (built-ins only)
//	cs_initkids        the pids of init's children now (the processes a run
//	                   must not claim as its orphans: the sandbox's main
//	                   process may start after the wrapper)
//	cs_escaped TOK SEED whether a live process (not SEED, the killing shell
//	                   or its ancestors) carries run TOK's marker: one grep
//	cs_kill TOK CG OWN T0 SEED GRACE [PRE]
//	                   kill the scope of run TOK (the marker's value,
//	                   token:wrapper pid): cgroup dir CG (or ""),
//	                   OWN "own" when the sandbox has its own process table,
//	                   T0 the wrapper's start time (clock ticks), SEED
//	                   pids that are members to begin with (the wrapper's
//	                   pid counts as a group/session id, never as a
//	                   member), PRE init's children when the wrapper
//	                   started (never orphans of the run); SIGTERM, GRACE
//	                   seconds (0: no SIGTERM, and a first pass with
//	                   built-ins only, which a fork bomb cannot stop), then
//	                   freeze and
//	                   SIGKILL. Prints nothing; returns when no member is
//	                   left (or after bounded rounds).
const scopeFns = cgroupFns + `cs_cgclear() {
  # Built-ins only: kill the cgroup's members until it is empty; 0 once it
  # is, 1 when it would not empty (bounded).
  cs_i=0
  while [ $cs_i -lt 400 ]; do
    cs_any=
    while IFS= read -r cs_p; do cs_any=1; break; done <"$cs_cg/cgroup.procs" 2>/dev/null || return 1
    [ -z "$cs_any" ] && return 0
    if [ -w "$cs_cg/cgroup.kill" ]; then
      echo 1 >"$cs_cg/cgroup.kill" 2>/dev/null
    else
      [ -w "$cs_cg/cgroup.freeze" ] && echo 1 >"$cs_cg/cgroup.freeze" 2>/dev/null
      cs_all=" "
      while IFS= read -r cs_p; do cs_all="$cs_all$cs_p "; done <"$cs_cg/cgroup.procs"
      kill -KILL $cs_all 2>/dev/null
      [ -w "$cs_cg/cgroup.freeze" ] && echo 0 >"$cs_cg/cgroup.freeze" 2>/dev/null
    fi
    cs_i=$((cs_i+1))
  done
  return 1
}
cs_stat() {
  cs_pid= cs_st=
  IFS= read -r cs_line 2>/dev/null <"$1" || return 1
  cs_pid=${cs_line%% *}
  cs_rest=${cs_line##*) }
  set -- $cs_rest
  cs_st=$1 cs_pp=$2 cs_pg=$3 cs_sid=$4
  shift 19
  cs_start=$1
  return 0
}
cs_initkids() {
  for cs_s in /proc/[0-9]*/stat; do
    cs_stat "$cs_s" || continue
    [ "$cs_pp" = 1 ] && printf '%s ' "$cs_pid"
  done
  return 0
}
cs_scan() {
  cs_new=
  for cs_s in /proc/[0-9]*/stat; do
    cs_stat "$cs_s" || continue
    case $cs_st in Z|X) continue ;; esac
    case "$cs_all$cs_excl" in *" $cs_pid "*) continue ;; esac
    cs_in=
    case "$cs_ids" in *" $cs_pp "*|*" $cs_pg "*|*" $cs_sid "*) cs_in=1 ;; esac
    if [ -z "$cs_in" ] && [ "$cs_own" = own ] && [ "$cs_pp" = 1 ] && [ "$cs_start" -ge "$cs_t0" ]; then
      case "$cs_other$cs_pre" in *" $cs_pid "*) ;; *) cs_in=1 ;; esac
    fi
    [ -n "$cs_in" ] || continue
    cs_all="$cs_all$cs_pid " cs_ids="$cs_ids$cs_pid " cs_new="$cs_new $cs_pid"
  done
}
cs_members() {
  cs_all=" " cs_ids=" " cs_other=" "
  # The wrapper's pid counts only while it is the wrapper (its start time
  # is T0): once it exited, its pid may belong to anyone.
  for cs_p in $cs_seedids; do
    cs_stat /proc/$cs_p/stat && [ "$cs_start" = "$cs_t0" ] && cs_ids="$cs_ids$cs_p "
  done
  if [ -n "$cs_nulok" ]; then
    # Each environment entry is a NUL-terminated line: the marker must be
    # a whole entry (a run whose token is a prefix of another's must not
    # claim it).
    for cs_f in $(grep -l -a -z -x -F -- "${cs_mark}=$cs_tok" /proc/[0-9]*/environ 2>/dev/null); do
      cs_p=${cs_f#/proc/}; cs_ids="$cs_ids${cs_p%/environ} "
    done
    if [ "$cs_own" = own ]; then
      for cs_f in $(grep -l -a -z -E -- "^${cs_mark}=" /proc/[0-9]*/environ 2>/dev/null); do
        cs_p=${cs_f#/proc/}; cs_p=${cs_p%/environ}
        case "$cs_ids" in *" $cs_p "*) ;; *) cs_other="$cs_other$cs_p " ;; esac
      done
    fi
  else
    # A grep without -z: one tr per process.
    for cs_f in /proc/[0-9]*/environ; do
      cs_e=$(tr '\000' '\n' <"$cs_f" 2>/dev/null) || continue
      cs_p=${cs_f#/proc/}; cs_p=${cs_p%/environ}
      case "
$cs_e
" in
      *"
${cs_mark}=$cs_tok
"*) cs_ids="$cs_ids$cs_p " ;;
      *"
${cs_mark}="*) cs_other="$cs_other$cs_p " ;;
      esac
    done
  fi
  if [ -n "$cs_cg" ] && [ -r "$cs_cg/cgroup.procs" ]; then
    while IFS= read -r cs_p; do cs_ids="$cs_ids$cs_p "; done <"$cs_cg/cgroup.procs"
  fi
  for cs_p in $cs_ids; do
    case "$cs_excl" in *" $cs_p "*) continue ;; esac
    cs_stat /proc/$cs_p/stat || continue
    case $cs_st in Z|X) continue ;; esac
    cs_all="$cs_all$cs_p "
  done
}
cs_base() {
  cs_all=" " cs_ids=" " cs_other=" "
  for cs_p in $cs_seedids; do
    cs_stat /proc/$cs_p/stat && [ "$cs_start" = "$cs_t0" ] && cs_ids="$cs_ids$cs_p "
  done
  if [ -n "$cs_cg" ] && [ -r "$cs_cg/cgroup.procs" ]; then
    while IFS= read -r cs_p; do
      cs_ids="$cs_ids$cs_p "
      case "$cs_excl" in *" $cs_p "*) continue ;; esac
      cs_all="$cs_all$cs_p "
    done <"$cs_cg/cgroup.procs"
  fi
}
cs_rounds() {
  # $1 the member finder (cs_base: built-ins only; cs_members), $2 the pause
  # between rounds ("" for none: sleep forks). Freeze, stop everything
  # found until nothing new appears, kill, verify; 0 when none is left.
  cs_round=0
  while [ $cs_round -lt 20 ]; do
    [ -n "$cs_cg" ] && [ -w "$cs_cg/cgroup.freeze" ] && echo 1 >"$cs_cg/cgroup.freeze" 2>/dev/null
    $1
    [ "$cs_all" != " " ] && kill -STOP $cs_all 2>/dev/null
    cs_scan; cs_n=0
    while [ -n "$cs_new" ] && [ $cs_n -lt 200 ]; do
      kill -STOP $cs_new 2>/dev/null
      cs_scan; cs_n=$((cs_n+1))
    done
    if [ "$cs_all" = " " ]; then
      [ -n "$cs_cg" ] && [ -w "$cs_cg/cgroup.freeze" ] && echo 0 >"$cs_cg/cgroup.freeze" 2>/dev/null
      return 0
    fi
    [ -n "$cs_cg" ] && [ -w "$cs_cg/cgroup.kill" ] && echo 1 >"$cs_cg/cgroup.kill" 2>/dev/null
    kill -KILL $cs_all 2>/dev/null
    [ -n "$cs_cg" ] && [ -w "$cs_cg/cgroup.freeze" ] && echo 0 >"$cs_cg/cgroup.freeze" 2>/dev/null
    [ -n "$2" ] && sleep "$2"
    cs_round=$((cs_round+1))
  done
  return 1
}
cs_exclude() {
  # Never members: pid 1, the killing shell and its ancestors, the seeds.
  # Built-ins only; each stat costs a read per byte, so cs_kill walks the
  # ancestors only when it needs the list (not when an emptied cgroup ends
  # the kill).
  cs_excl=" 1 " cs_p=$$
  while [ -n "$cs_p" ] && [ "$cs_p" -gt 1 ] 2>/dev/null; do
    cs_excl="$cs_excl$cs_p "
    cs_stat /proc/$cs_p/stat || break
    cs_p=$cs_pp
  done
  for cs_p in $cs_seedids; do cs_excl="$cs_excl$cs_p "; done
}
cs_escgrep() {
  # 0 when a live process other than the excluded ones carries the
  # marker (cs_mark=cs_tok): one grep over every environment.
  for cs_f in $(grep -l -a -z -x -F -- "${cs_mark}=$cs_tok" /proc/[0-9]*/environ 2>/dev/null); do
    [ -n "$cs_excl" ] || cs_exclude # before cs_p: it walks with cs_p
    cs_p=${cs_f#/proc/}; cs_p=${cs_p%/environ}
    case "$cs_excl" in *" $cs_p "*) continue ;; esac
    cs_stat /proc/$cs_p/stat || continue
    case $cs_st in Z|X) continue ;; esac
    return 0
  done
  return 1
}
cs_escaped() {
  # cs_escaped TOK SEED: cs_escgrep for run TOK outside cs_kill, SEED the
  # wrapper's pid (never a member).
  cs_tok=$1 cs_seedids=$2 cs_mark=` + RunMarkerEnv + ` cs_excl=
  cs_escgrep
}
cs_kill() {
  cs_tok=$1 cs_cg=$2 cs_own=$3 cs_t0=${4:-0} cs_seedids=$5 cs_grace=${6:-1} cs_pre=" $7 "
  cs_mark=` + RunMarkerEnv + ` cs_nulok= cs_excl=
  # With no grace (the wrapper, once the agent exited): first stop and kill
  # what built-ins alone can find (the cgroup, groups and sessions, orphans
  # in an own process table). A fork bomb may hold every process slot, and
  # a shell that cannot fork exits: nothing below forks until it is dead.
  # Where the run has a cgroup of its own, that is all it takes once the
  # agent exited: every process the run started is in it (leaving it needs
  # write access to the cgroup tree), so an emptied cgroup ends the kill
  # without a scan of the process table (which costs one read per byte per
  # process in a shell, and grows with every process on the host).
  if [ "$cs_grace" = 0 ] && [ -n "$cs_cg" ] && cs_cgclear; then
    # The cgroup is empty. A process that left it (its uid may write the
    # cgroup tree: root can) but kept the marker is found by one grep; only
    # when one lives do the other rules run.
    cs_escgrep || return 0
  fi
  [ -n "$cs_excl" ] || cs_exclude
  [ "$cs_grace" = 0 ] && cs_rounds cs_base ""
  printf 'a\000b\000' | grep -q -a -z -x -F b 2>/dev/null && cs_nulok=1
  cs_members; cs_scan
  cs_n=0
  while [ -n "$cs_new" ] && [ $cs_n -lt 50 ]; do cs_scan; cs_n=$((cs_n+1)); done
  [ "$cs_all" = " " ] && return 0
  kill -TERM $cs_all 2>/dev/null
  cs_i=0
  while [ $cs_i -lt $((cs_grace*10)) ]; do
    cs_live=
    for cs_p in $cs_all; do
      cs_stat /proc/$cs_p/stat || continue
      case $cs_st in Z|X) ;; *) cs_live=1; break ;; esac
    done
    [ -z "$cs_live" ] && break
    sleep 0.1; cs_i=$((cs_i+1))
  done
  cs_rounds cs_members 0.05
}
`

// cgroupFns are the scope's cgroup look-ups, cs_v2root (cs_root: the
// cgroup v2 mount, "" without one) and cs_cgof PID (cs_cgp: the process's
// cgroup v2 path), also used on their own by Remove.
const cgroupFns = `cs_v2root() {
  # The usual places first (unified, then hybrid): a shell's read costs a
  # system call per byte, and a host's mount table can be long.
  for cs_root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ -f "$cs_root/cgroup.controllers" ] && [ ! -f "$cs_root/../cgroup.controllers" ] && return 0
  done
  cs_root=
  while read -r cs_a cs_mp cs_fs cs_b; do
    [ "$cs_fs" = cgroup2 ] && { cs_root=$cs_mp; return 0; }
  done </proc/self/mounts 2>/dev/null
  return 0
}
cs_cgof() {
  cs_cgp=
  while IFS= read -r cs_l; do
    case $cs_l in 0::*) cs_cgp=${cs_l#0::}; return 0 ;; esac
  done </proc/$1/cgroup 2>/dev/null
  return 0
}
`
