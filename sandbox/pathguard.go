package sandbox

// ShellPathGuard is the shared symbolic-link rule for providers that reach
// their file system through a shell (exec-backed file systems). It defines
// one POSIX sh function:
//
//	corral_resolve ROOT PATH FOLLOW
//
// ROOT is the real workspace root inside the sandbox and PATH a real path
// under it, already checked by CleanPath and mapped with MapPath. The
// function resolves every symbolic link along PATH (all of it when FOLLOW is
// 1; all but the final element when FOLLOW is 0, for operations that act on
// a link itself) and prints the resolved path. When the resolved path is
// not ROOT or below it, it prints ShellEscapeMarker on stderr and exits the
// script with status ShellEscapeStatus; providers map that to EscapeError.
//
// Values reach the function as positional parameters, never as shell text.
// Command substitution would strip a trailing newline from a resolved name;
// the guard keeps it (readlink's output is followed by a marker that is cut
// off again). The check and the operation that follows are two steps, so a process
// inside the sandbox that swaps a directory for a link in between can win
// the race; the guard protects the caller from following links it did not
// create, not from the sandbox itself.
const ShellPathGuard = `corral_resolve() {
  cr_root=$(readlink -f -- "$1" 2>/dev/null && printf x) && cr_root=${cr_root%?x} || cr_root=$1
  cr_p=$2 cr_rest=
  if [ "$3" = 0 ]; then
    case "$cr_p" in */*) cr_rest=/${cr_p##*/} cr_p=${cr_p%/*} ;; esac
    [ -n "$cr_p" ] || cr_p=/
  fi
  while [ ! -e "$cr_p" ] && [ ! -L "$cr_p" ]; do
    cr_rest=/${cr_p##*/}$cr_rest
    cr_p=${cr_p%/*}
    [ -n "$cr_p" ] || { cr_p=/; break; }
  done
  cr_r=$(readlink -f -- "$cr_p" 2>/dev/null && printf x) && cr_r=${cr_r%?x} || cr_r=
  case "$cr_r" in
    "$cr_root"|"$cr_root"/*) ;;
    *) echo ` + ShellEscapeMarker + ` >&2; exit ` + shellEscapeStatusText + ` ;;
  esac
  [ "$cr_r" = / ] && cr_r=
  printf '%s\n' "$cr_r$cr_rest"
}
`

// ShellEscapeMarker is what ShellPathGuard prints on stderr for a path that
// leaves the workspace.
const ShellEscapeMarker = "corral-path-escapes-workspace"

// ShellEscapeStatus is the exit status ShellPathGuard ends the script with
// for a path that leaves the workspace.
const ShellEscapeStatus = 97

const shellEscapeStatusText = "97"
