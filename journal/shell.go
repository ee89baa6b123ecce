package journal

// aliveFn is the one liveness check of a run's wrapper, shared by every
// script that must know whether the wrapper still runs (poll, probe, the
// follower's watchdog, and the kill script): concatenate it in front of the
// script's text. It defines shell functions whose names and variables start
// with cj_ (callers' own variables must not):
//
//	cj_alive JOURNAL
//
// returns 0 when the wrapper journaling to JOURNAL is alive and sets
// cj_wpid to its pid; 1 when it is gone; 2 when the journal is empty or
// missing (the wrapper has not started, or never will). It also sets
// cj_wnew=1 when the start line has the current form (with "__t").
//
// A process is this journal's wrapper when its argv holds
// "corral-journal", the journal's directory and JOURNAL in a row, as
// Command lays it out. The wrapper is alive when either
//   - the process the start line names is the wrapper, runs with the start
//     time the wrapper recorded there (field 22 of /proc/PID/stat) and is
//     not a zombie, so a reused pid is not the wrapper (the quick check); or
//   - any process is this journal's wrapper (a scan of /proc/*/cmdline).
//
// The agent can rewrite the journal, start line included, but it cannot
// hide a running process: a rewritten start line never makes a live
// wrapper look gone, and cj_wpid is always a process with the wrapper's
// argv, never one a rewritten start line names, so a kill aimed at
// cj_wpid's processes cannot be pointed elsewhere. An agent can make a
// gone wrapper look alive by running a process with that argv: that ends
// nothing.
//
// Where there is no /proc, the start line's pid alone decides (kill -0):
// a reused pid reads as alive, and cj_wpid is whatever the start line
// names.
//
//	cj_size FILE
//
// prints FILE's size in bytes (0 when missing) without reading it.
//
//	cj_readpos PID FILE
//
// prints the read offset of PID's descriptor open on FILE, from
// /proc/PID/fdinfo, and nothing where that cannot be read.
const aliveFn = `cj_alive() {
  cj_wpid= cj_wnew= ca_p= ca_t=
  [ -s "$1" ] || return 2
  ca_l=$(head -c 256 "$1" 2>/dev/null)
  ca_l=${ca_l%%'
'*}
  case $ca_l in
  '{"__start":'[0-9]*)
    ca_p=${ca_l#'{"__start":'}; ca_p=${ca_p%%[!0-9]*}
    case $ca_l in *',"__t":'[0-9]*) cj_wnew=1 ca_t=${ca_l#*',"__t":'}; ca_t=${ca_t%%[!0-9]*} ;; esac ;;
  esac
  if [ ! -r /proc/self/stat ]; then
    [ -n "$ca_p" ] || return 2
    kill -0 "$ca_p" 2>/dev/null && { cj_wpid=$ca_p; return 0; }
    return 1
  fi
  ca_d=${1%/*}
  ca_n=$(printf '\001corral-journal\001%s\001%s\001' "${ca_d:-/}" "$1")
  if [ -n "$ca_p" ] && IFS= read -r ca_s 2>/dev/null <"/proc/$ca_p/stat" && cj_alive_stat "${ca_t:-0}" ${ca_s##*) } &&
    tr '\001\000' '\002\001' 2>/dev/null <"/proc/$ca_p/cmdline" | grep -q -F -e "$ca_n"; then
    cj_wpid=$ca_p; return 0
  fi
  cj_wpid=$(head -c 65536 /proc/[0-9]*/cmdline 2>/dev/null | tr '\001\000' '\002\001' | grep -F -e '==> /proc/' -e "$ca_n" | {
    while IFS= read -r ca_x; do
      case $ca_x in
      '==> /proc/'*) ca_q=${ca_x#'==> /proc/'}; ca_q=${ca_q%%/*} ;;
      *"$ca_n"*) echo "$ca_q"; break ;;
      esac
    done; })
  [ -n "$cj_wpid" ]
}
cj_alive_stat() {
  ca_e=$1; shift
  case $1 in ''|Z*|X*|x*) return 1 ;; esac
  [ "$ca_e" = 0 ] && return 0
  [ $# -ge 20 ] || return 1
  shift 19
  [ "$1" = "$ca_e" ]
}
cj_size() {
  (set -f; set -- $(ls -ln "$1" 2>/dev/null); echo "${5:-0}")
}
cj_readpos() {
  for cr_f in /proc/"$1"/fd/*; do
    [ "$(readlink "$cr_f" 2>/dev/null)" = "$2" ] || continue
    while IFS=':	 ' read -r cr_k cr_v; do
      [ "$cr_k" = pos ] && { echo "$cr_v"; return 0; }
    done <"/proc/$1/fdinfo/${cr_f##*/}"
  done 2>/dev/null
  return 0
}
`

// startLine is the wrapper's start-line step: it records the wrapper's pid
// and its start time (field 22 of /proc/$$/stat, 0 where there is no
// /proc) as {"__start":PID,"__t":STARTTIME}. It runs before the agent.
// The field is taken by a function's positional parameters (a function
// has its own), so no subshell is forked on the run's path; it counts its
// arguments first, since a shift past them ends a non-interactive dash.
const startLine = `cj_t=0
cj_f22() { [ $# -ge 20 ] || return 0; shift 19; cj_t=$1; }
if IFS= read -r cj_st 2>/dev/null </proc/$$/stat; then set -f; cj_f22 ${cj_st##*) }; set +f; fi
case $cj_t in ''|*[!0-9]*) cj_t=0 ;; esac
printf '{"__start":%d,"__t":%s}\n' "$$" "$cj_t" >>"$cj_out"`

// endLine is the wrapper's first step after the agent and its processes
// are gone: it writes a newline, then the end line
// {"__end":"NONCE","__nl":1} ("__nl" tells the framer about that newline). The
// diff line, if any, and the exit sentinel follow it. The newline ends an
// unterminated last line of the agent, so the end line is always a line
// of its own, without a look at the agent's last byte (that took a
// subshell and a tail on every run's path); where the agent's output
// ended with a newline it makes an empty line, which the framer drops
// (an empty line right before this run's end line is the wrapper's).
const endLine = `printf '\n{"__end":"%s","__nl":1}\n' "$cj_nonce" >>"$cj_out"`
