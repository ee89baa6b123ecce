// Package execfs is a sandbox.FS for any sandbox that can run a POSIX shell:
// every file operation is one command, "sh -c SCRIPT sh ROOT PATH...",
// handed to a Runner that the provider supplies (its own exec).
//
// The scripts assume only what BusyBox and GNU coreutils both have (sh,
// cat, mv, rm, rmdir, mkdir, chmod, stat -c, readlink -f, test, printf), so
// the same FS works in a FROM-scratch BusyBox image, in alpine, and in
// ordinary images such as node:22 or python:3.12.
//
// Paths follow the shared rules of package sandbox: sandbox.MapPath checks
// each path lexically (InvalidArgument) and maps it under Options.Root, and
// the script then resolves symbolic links with sandbox.ShellPathGuard,
// rejecting any path that leaves the root with PermissionDenied before it
// reads or writes anything. (WriteFile's common case, an existing parent and
// a target that is no link, applies the same rule with cd -P, which leaves
// the parent's physical path in $PWD without starting a process.) Paths travel as positional parameters, never as
// shell text. Operations on a link itself (Lstat, RemoveAll, both sides of
// Rename) leave the final element unresolved.
//
// Errors: a missing path is NotFound; a non-directory in the way, a
// directory where a file is expected or a non-empty directory is
// FailedPrecondition; a failure of the Runner itself is wrapped once with
// Unavailable unless it already carries a code.
package execfs

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// Runner runs one command to completion inside the sandbox, feeding it
// cmd.Stdin, and returns its exit code and complete output (no OutputLimit
// is set). A non-zero exit is a result, not an error; an error means the
// command could not be run. Providers pass their own exec.
type Runner func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error)

// Options configure an FS.
type Options struct {
	// Root is the real path of the workspace inside the sandbox, the
	// directory behind the portable root "/workspace". Default
	// sandbox.WorkspaceRoot.
	Root string
	// Provider is the provider's name, used in UnsupportedCapabilityError.
	Provider string
}

// New returns an FS that runs every operation through run.
func New(run Runner, opts Options) sandbox.FS {
	if opts.Root == "" {
		opts.Root = sandbox.WorkspaceRoot
	}
	return &execFS{run: run, root: opts.Root, provider: opts.Provider}
}

type execFS struct {
	run      Runner
	root     string
	provider string
}

var _ sandbox.FS = (*execFS)(nil)

// Exit statuses the scripts use to report what went wrong. They sit next
// to sandbox.ShellEscapeStatus (97), away from the statuses of the tools.
const (
	exitNotFound = 90 // the path does not exist
	exitNotDir   = 91 // a non-directory is in the way, or a directory was expected
	exitIsDir    = 92 // a directory where a file was expected
	exitNotEmpty = 93 // a directory that is not empty would be replaced
	exitNotLink  = 94 // a symbolic link was expected, or refused
	exitExists   = 95 // the path exists already
)

// prelude is the guard plus two helpers.
//
// corral_cd PATH FOLLOW changes to the directory that holds the entry the
// guard will hand to readlink -f (the deepest one that exists or is a
// link). BusyBox's readlink -f resolves the relative target of a dangling
// link against the working directory instead of the link's own directory;
// from there both agree.
//
// corral_missing PATH exits for a PATH that does not exist: exitNotFound
// when its nearest existing ancestor is a directory, exitNotDir when a
// non-directory is in the way (the ENOTDIR of the system calls).
const prelude = sandbox.ShellPathGuard + `corral_cd() {
  cc=$1
  if [ "$2" = 0 ]; then case "$cc" in */*) cc=${cc%/*} ;; esac; fi
  while [ -n "$cc" ] && [ ! -e "$cc" ] && [ ! -L "$cc" ]; do cc=${cc%/*}; done
  [ -n "$cc" ] && cd -P "${cc%/*}/" 2>/dev/null
  return 0
}
corral_missing() {
  cm=${1%/*}
  while [ -n "$cm" ] && [ ! -e "$cm" ] && [ ! -L "$cm" ]; do cm=${cm%/*}; done
  if [ -z "$cm" ] || [ -d "$cm" ]; then exit 90; fi
  exit 91
}
`

// resolve assigns the resolved form of a positional parameter to a
// variable, ending the script with the guard's status on an escape. The
// "x" keeps trailing newlines of a file name from being eaten by the
// command substitution.
func resolve(v string, arg int, follow bool) string {
	f := "0"
	if follow {
		f = "1"
	}
	return fmt.Sprintf("corral_cd \"$%d\" %s\n%s=$(corral_resolve \"$1\" \"$%d\" %s && printf x) || exit $?; %s=${%s%%?x}\n", arg, f, v, arg, f, v, v)
}

var (
	readScript = prelude + resolve("p", 2, true) + `[ -e "$p" ] || corral_missing "$p"
[ -d "$p" ] && exit 92
exec cat "$p"
`

	// writeScript writes stdin to a temporary file next to the target and
	// renames it into place, keeping the mode of a file it replaces.
	//
	// Its fast path serves the common case, an existing parent directory
	// and a target that is not a symbolic link, with shell builtins for the
	// guard: cd -P resolves every link of the root and of the parent and
	// leaves the physical path in $PWD (no readlink, no command
	// substitution), and the parent must be the root or below it, as
	// ShellPathGuard demands. Then cat, mv and, when a file is replaced,
	// one stat of both files are all the processes it starts (chmod only
	// when the modes differ). Anything else takes the general path below.
	writeScript = `if [ -d "${2%/*}/" ] && [ ! -L "$2" ] && cd -P -- "$1" 2>/dev/null; then
  r=$PWD b=${2##*/}
  if cd -P -- "${2%/*}/" 2>/dev/null; then
    case "$PWD" in
      "$r"|"$r"/*) ;;
      *) echo ` + sandbox.ShellEscapeMarker + ` >&2; exit ` + strconv.Itoa(sandbox.ShellEscapeStatus) + ` ;;
    esac
    [ -d "./$b" ] && exit 92
    t=./.corral-write.$$
    trap 'rm -f "$t"' EXIT
    trap 'exit 143' HUP INT TERM
    cat > "$t" || exit $?
    if [ -f "./$b" ]; then
      set -- $(stat -c %a "./$b" "$t" 2>/dev/null)
      [ -n "$1" ] && [ "$1" != "$2" ] && chmod "$1" "$t" 2>/dev/null
    fi
    mv -f "$t" "./$b" && trap - EXIT
    exit
  fi
  cd /
fi
` + prelude + resolve("p", 2, true) + `[ -d "$p" ] && exit 92
d=${p%/*}; [ -n "$d" ] || d=/
if [ ! -d "$d" ]; then
  if [ -e "$d" ] || [ -L "$d" ]; then exit 91; fi
  cm=$d
  while [ -n "$cm" ] && [ ! -e "$cm" ] && [ ! -L "$cm" ]; do cm=${cm%/*}; done
  [ -z "$cm" ] || [ -d "$cm" ] || exit 91
  mkdir -p "$d" || exit $?
fi
t=$d/.corral-write.$$
trap 'rm -f "$t"' EXIT
trap 'exit 143' HUP INT TERM
cat > "$t" || exit $?
if [ -f "$p" ]; then
  m=$(stat -c %a "$p" 2>/dev/null) && chmod "$m" "$t" 2>/dev/null
fi
mv -f "$t" "$p" && trap - EXIT
`

	// listScript prints one record per entry: a type letter (l, d, f or
	// o), the name, and a NUL. Globbing is the one listing every sh has
	// that survives any byte in a name.
	listScript = prelude + resolve("p", 2, true) + `[ -e "$p" ] || corral_missing "$p"
[ -d "$p" ] || exit 91
cd "$p" || exit $?
for f in * .[!.]* ..?*; do
  if [ -L "$f" ]; then t=l
  elif [ -d "$f" ]; then t=d
  elif [ -f "$f" ]; then t=f
  elif [ -e "$f" ]; then t=o
  else continue
  fi
  printf '%s%s\000' "$t" "$f"
done
`

	mkdirScript = prelude + resolve("p", 2, true) + `[ -d "$p" ] && exit 0
if [ -e "$p" ] || [ -L "$p" ]; then exit 91; fi
cm=${p%/*}
while [ -n "$cm" ] && [ ! -e "$cm" ] && [ ! -L "$cm" ]; do cm=${cm%/*}; done
[ -z "$cm" ] || [ -d "$cm" ] || exit 91
exec mkdir -p "$p"
`

	removeScript = prelude + resolve("p", 2, false) + `if [ -e "$p" ] || [ -L "$p" ]; then exec rm -rf "$p"; fi
`

	// renameScript gives mv the semantics of rename(2): a destination link
	// is replaced (never followed), a directory replaces only an empty
	// directory, and nothing is ever moved into a destination directory.
	renameScript = prelude + resolve("s", 2, false) + resolve("d", 3, false) + `if [ ! -e "$s" ] && [ ! -L "$s" ]; then corral_missing "$s"; fi
[ "$s" = "$d" ] && exit 0
dp=${d%/*}; [ -n "$dp" ] || dp=/
[ -d "$dp" ] || corral_missing "$dp/x"
sd=0; if [ -d "$s" ] && [ ! -L "$s" ]; then sd=1; fi
if [ -L "$d" ]; then
  rm -f "$d" || exit $?
elif [ -d "$d" ]; then
  [ $sd = 1 ] || exit 92
  rmdir "$d" 2>/dev/null || exit 93
elif [ -e "$d" ] && [ $sd = 1 ]; then
  exit 91
fi
exec mv -f "$s" "$d"
`

	// statScript prints the raw mode in hex and the size.
	statScript = prelude + resolve("p", 2, true) + `if [ ! -e "$p" ] && [ ! -L "$p" ]; then corral_missing "$p"; fi
exec stat -c '%f %s' "$p"
`
	lstatScript = prelude + resolve("p", 2, false) + `if [ ! -e "$p" ] && [ ! -L "$p" ]; then corral_missing "$p"; fi
exec stat -c '%f %s' "$p"
`

	existsScript = prelude + resolve("p", 2, true) + `if [ -e "$p" ]; then echo y; else echo n; fi
`
)

// exec runs script with ROOT and args as positional parameters and maps a
// failure to an error. op and name are for the error.
func (f *execFS) exec(ctx context.Context, op, name, script string, stdin []byte, args ...string) (*sandbox.ExecResult, error) {
	argv := append([]string{"sh", "-c", script, "sh", f.root}, args...)
	cmd := sandbox.Command{Args: argv}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	res, err := f.run(ctx, cmd)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, op, name, err)
	}
	if res.ExitCode != 0 {
		return nil, scriptError(op, name, res)
	}
	return res, nil
}

// scriptError maps a script's exit status to an error.
func scriptError(op, name string, res *sandbox.ExecResult) error {
	msg := strings.TrimSpace(string(res.Stderr))
	switch res.ExitCode {
	case sandbox.ShellEscapeStatus:
		return sandbox.EscapeError(op, name)
	case exitNotFound:
		return sandbox.Errorf(sandbox.NotFound, op, name, "no such file or directory")
	case exitNotDir:
		return sandbox.Errorf(sandbox.FailedPrecondition, op, name, "not a directory")
	case exitIsDir:
		return sandbox.Errorf(sandbox.FailedPrecondition, op, name, "is a directory")
	case exitNotEmpty:
		return sandbox.Errorf(sandbox.FailedPrecondition, op, name, "directory not empty")
	case exitNotLink:
		return sandbox.Errorf(sandbox.FailedPrecondition, op, name, "symbolic link expected or refused")
	case exitExists:
		return sandbox.Errorf(sandbox.AlreadyExists, op, name, "file exists")
	case 126, 127:
		return sandbox.Errorf(sandbox.FailedPrecondition, op, name, "the sandbox cannot run sh (exit %d): %s", res.ExitCode, msg)
	}
	code := sandbox.Internal
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, "permission denied"), strings.Contains(lower, "read-only file system"),
		strings.Contains(lower, "operation not permitted"):
		code = sandbox.PermissionDenied
	case strings.Contains(lower, "no space left"), strings.Contains(lower, "quota exceeded"):
		code = sandbox.ResourceExhausted
	case strings.Contains(lower, "no such file"):
		code = sandbox.NotFound
	case strings.Contains(lower, "not a directory"), strings.Contains(lower, "is a directory"),
		strings.Contains(lower, "not empty"), strings.Contains(lower, "file exists"):
		code = sandbox.FailedPrecondition
	}
	if msg == "" {
		msg = "no message"
	}
	return sandbox.Errorf(code, op, name, "exit status %d: %s", res.ExitCode, msg)
}

// real validates name and maps it under the root.
func (f *execFS) real(name string) (rel, real string, err error) {
	rel, err = sandbox.CleanPath(name)
	if err != nil {
		return "", "", err
	}
	real, err = sandbox.MapPath(f.root, name)
	return rel, real, err
}

// ReadFile returns the file's contents.
func (f *execFS) ReadFile(ctx context.Context, name string) ([]byte, error) {
	_, p, err := f.real(name)
	if err != nil {
		return nil, err
	}
	res, err := f.exec(ctx, "fs.read", name, readScript, nil, p)
	if err != nil {
		return nil, err
	}
	return res.Stdout, nil
}

// WriteFile writes data through a temporary file in the same directory,
// creating parent directories as needed.
func (f *execFS) WriteFile(ctx context.Context, name string, data []byte) error {
	rel, p, err := f.real(name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.write", name, "cannot write the workspace root")
	}
	if data == nil {
		data = []byte{}
	}
	_, err = f.exec(ctx, "fs.write", name, writeScript, data, p)
	return err
}

// ReadDir lists a directory, sorted by name.
func (f *execFS) ReadDir(ctx context.Context, name string) ([]sandbox.DirEntry, error) {
	rel, p, err := f.real(name)
	if err != nil {
		return nil, err
	}
	res, err := f.exec(ctx, "fs.list", name, listScript, nil, p)
	if err != nil {
		return nil, err
	}
	base := sandbox.PortablePath(rel)
	var out []sandbox.DirEntry
	for rec := range bytes.SplitSeq(res.Stdout, []byte{0}) {
		if len(rec) < 2 {
			continue
		}
		var t sandbox.FileType
		switch rec[0] {
		case 'l':
			t = sandbox.TypeSymlink
		case 'd':
			t = sandbox.TypeDir
		case 'f':
			t = sandbox.TypeFile
		default:
			t = sandbox.TypeOther
		}
		n := string(rec[1:])
		out = append(out, sandbox.DirEntry{Name: n, Path: base + "/" + n, Type: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// MkdirAll creates a directory and its parents.
func (f *execFS) MkdirAll(ctx context.Context, name string) error {
	_, p, err := f.real(name)
	if err != nil {
		return err
	}
	_, err = f.exec(ctx, "fs.mkdir", name, mkdirScript, nil, p)
	return err
}

// RemoveAll removes a file, link or tree; a missing path is fine. The
// workspace root itself cannot be removed.
func (f *execFS) RemoveAll(ctx context.Context, name string) error {
	rel, p, err := f.real(name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.remove", name, "cannot remove the workspace root")
	}
	_, err = f.exec(ctx, "fs.remove", name, removeScript, nil, p)
	return err
}

// Rename moves oldName to newName with the semantics of rename(2). The
// destination's parent must exist.
func (f *execFS) Rename(ctx context.Context, oldName, newName string) error {
	from, pf, err := f.real(oldName)
	if err != nil {
		return err
	}
	to, pt, err := f.real(newName)
	if err != nil {
		return err
	}
	if from == "." || to == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.rename", oldName, "cannot rename the workspace root")
	}
	_, err = f.exec(ctx, "fs.rename", oldName, renameScript, nil, pf, pt)
	return err
}

// Stat describes the file, following symbolic links.
func (f *execFS) Stat(ctx context.Context, name string) (sandbox.FileInfo, error) {
	return f.stat(ctx, "fs.stat", name, statScript)
}

// Lstat describes the file without following a final symbolic link.
func (f *execFS) Lstat(ctx context.Context, name string) (sandbox.FileInfo, error) {
	return f.stat(ctx, "fs.lstat", name, lstatScript)
}

func (f *execFS) stat(ctx context.Context, op, name, script string) (sandbox.FileInfo, error) {
	rel, p, err := f.real(name)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	if rel == "." {
		script = statScript // the root itself is always followed
	}
	res, err := f.exec(ctx, op, name, script, nil, p)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	mode, size, err := parseStat(res.Stdout)
	if err != nil {
		return sandbox.FileInfo{}, sandbox.Wrap(sandbox.Internal, op, name, err)
	}
	pp := sandbox.PortablePath(rel)
	return sandbox.FileInfo{Name: path.Base(pp), Path: pp, Type: sandbox.FileTypeOf(mode), Mode: mode, Size: size}, nil
}

// Exists reports whether the path exists, following symbolic links.
func (f *execFS) Exists(ctx context.Context, name string) (bool, error) {
	_, p, err := f.real(name)
	if err != nil {
		return false, err
	}
	res, err := f.exec(ctx, "fs.exists", name, existsScript, nil, p)
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(res.Stdout)) == "y", nil
}

// Watch is not supported over exec.
func (f *execFS) Watch(context.Context, string, func(sandbox.FileEvent)) (func(), error) {
	return nil, sandbox.Unsupported(f.provider, "watch")
}

// parseStat reads "HEXMODE SIZE" as printed by stat -c '%f %s'.
func parseStat(out []byte) (fs.FileMode, int64, error) {
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		return 0, 0, fmt.Errorf("unexpected stat output %q", out)
	}
	raw, err := strconv.ParseUint(fields[0], 16, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("unexpected stat mode %q: %w", fields[0], err)
	}
	size, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("unexpected stat size %q: %w", fields[1], err)
	}
	return UnixMode(uint32(raw)), size, nil
}

// UnixMode converts a Unix st_mode (type bits, set-id and sticky bits and
// permissions) to an fs.FileMode.
func UnixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	case 0o100000:
	default:
		mode |= fs.ModeIrregular
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
