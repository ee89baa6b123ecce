package execfs

import (
	"context"
	"fmt"
	"io/fs"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

var (
	_ sandbox.LinkFS = (*execFS)(nil)
	_ sandbox.ModeFS = (*execFS)(nil)
)

var (
	// readlinkScript prints a link's target followed by one newline.
	readlinkScript = prelude + resolve("p", 2, false) + `if [ ! -e "$p" ] && [ ! -L "$p" ]; then corral_missing "$p"; fi
[ -L "$p" ] || exit ` + fmt.Sprint(exitNotLink) + `
exec readlink -- "$p"
`

	// symlinkScript makes $3 a link to $2; the parent must exist and $3
	// must not.
	symlinkScript = prelude + resolve("p", 3, false) + `if [ -e "$p" ] || [ -L "$p" ]; then exit ` + fmt.Sprint(exitExists) + `; fi
d=${p%/*}; [ -n "$d" ] || d=/
[ -d "$d" ] || corral_missing "$p"
exec ln -s -- "$2" "$p"
`

	// chmodScript sets the octal mode $2 on $3, refusing a final link.
	chmodScript = prelude + resolve("p", 3, false) + `if [ ! -e "$p" ] && [ ! -L "$p" ]; then corral_missing "$p"; fi
[ -L "$p" ] && exit ` + fmt.Sprint(exitNotLink) + `
exec chmod "$2" "$p"
`
	chmodRootScript = prelude + resolve("p", 3, true) + `exec chmod "$2" "$p"
`
)

// Readlink returns a link's target without following it.
func (f *execFS) Readlink(ctx context.Context, name string) (string, error) {
	const op = "fs.readlink"
	rel, p, err := f.real(name)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, op, name, "the workspace root is not a link")
	}
	res, err := f.exec(ctx, op, name, readlinkScript, nil, p)
	if err != nil {
		return "", err
	}
	t, ok := strings.CutSuffix(string(res.Stdout), "\n")
	if !ok || t == "" {
		return "", sandbox.Errorf(sandbox.Internal, op, name, "unexpected readlink output %q", res.Stdout)
	}
	return t, nil
}

// Symlink makes name a link to target; see sandbox.LinkFS. Both travel as
// positional parameters.
func (f *execFS) Symlink(ctx context.Context, target, name string) error {
	const op = "fs.symlink"
	rel, p, err := f.real(name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, op, name, "cannot replace the workspace root")
	}
	if err := sandbox.CheckLinkTarget(rel, target); err != nil {
		return err
	}
	_, err = f.exec(ctx, op, name, symlinkScript, nil, target, p)
	return err
}

// Chmod sets a file's or directory's permission bits; a final link is
// refused, not followed.
func (f *execFS) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	const op = "fs.chmod"
	rel, p, err := f.real(name)
	if err != nil {
		return err
	}
	script := chmodScript
	if rel == "." {
		script = chmodRootScript
	}
	_, err = f.exec(ctx, op, name, script, nil, fmt.Sprintf("%o", mode&0o777), p)
	return err
}
