package sandbox

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"unicode/utf8"
)

// LinkFS is the optional part of an FS that reads and makes symbolic
// links. Find it with a type assertion (fsys.(LinkFS)); an FS without it
// cannot carry links through a checkpoint. Wrappers that hand out an FS must
// keep it (the guard passes the provider's FS through unchanged).
type LinkFS interface {
	// Readlink returns the target of the symbolic link name, byte for byte,
	// without following it. The final element is not resolved; a path
	// whose parent directories leave the workspace through a link is
	// PermissionDenied, a missing path NotFound and a path that is not a
	// link FailedPrecondition.
	Readlink(ctx context.Context, name string) (string, error)
	// Symlink makes name a symbolic link to target. The target must pass
	// CheckLinkTarget (a relative path that stays inside the workspace,
	// else InvalidArgument); name's parent directory must exist (NotFound)
	// and name must not (AlreadyExists).
	Symlink(ctx context.Context, target, name string) error
}

// ModeFS is the optional part of an FS that sets permission bits. Find it
// with a type assertion, as LinkFS.
type ModeFS interface {
	// Chmod sets the permission bits (mode & 0o777) of the file or
	// directory name. A final symbolic link is not followed: it is
	// FailedPrecondition.
	Chmod(ctx context.Context, name string, mode fs.FileMode) error
}

// CheckLinkTarget is the one rule for the target of a symbolic link that
// corral makes or keeps: link is the link's own path relative to the
// workspace root (as CleanPath returns it) and target what it points to.
// The target must be non-empty valid UTF-8 without NUL, relative, in clean
// form (path.Clean leaves it unchanged: no "." or empty segment, no
// trailing "/", and ".." only as leading segments, so the target never
// climbs out of a directory it has named, which might itself be a link), and
// it must not
// climb above the workspace root from the link's directory. A violation
// is InvalidArgument.
func CheckLinkTarget(link, target string) error {
	const op = "fs.symlink"
	switch {
	case target == "":
		return Errorf(InvalidArgument, op, link, "empty link target")
	case strings.IndexByte(target, 0) >= 0:
		return Errorf(InvalidArgument, op, link, "link target contains a NUL byte")
	case !utf8.ValidString(target):
		return Errorf(InvalidArgument, op, link, "link target is not valid UTF-8")
	case path.IsAbs(target):
		return Errorf(InvalidArgument, op, link, "absolute link target %q", target)
	case path.Clean(target) != target:
		return Errorf(InvalidArgument, op, link, "link target %q is not in clean form", target)
	}
	up := 0
	for _, seg := range strings.Split(target, "/") {
		if seg != ".." {
			break
		}
		up++
	}
	depth := 0
	if d := path.Dir(link); d != "." {
		depth = strings.Count(d, "/") + 1
	}
	if up > depth {
		return Errorf(InvalidArgument, op, link, "link target %q leaves the workspace", target)
	}
	return nil
}
