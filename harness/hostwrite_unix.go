//go:build unix

package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
)

// hostWrites is true where WriteFile can write a host path itself.
const hostWrites = true

// writeHostFile is WriteFile on the host: the directory made 0700, the
// file written whole with the given octal mode (never through a symlink
// at its own name), as the shell version does under umask 077.
func writeHostFile(hp, path string, data []byte, mode string) error {
	perm, err := strconv.ParseUint(mode, 8, 32)
	if err != nil || perm > 0o777 {
		return sandbox.Errorf(sandbox.InvalidArgument, "harness.write", path, "mode %q: want octal permissions such as 600", mode)
	}
	if err := os.MkdirAll(filepath.Dir(hp), 0o700); err != nil {
		return sandbox.Wrap(sandbox.Internal, "harness.write", path, err)
	}
	f, err := os.OpenFile(hp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, os.FileMode(perm)&0o700)
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, "harness.write", path, err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(hp, os.FileMode(perm))
	}
	if werr != nil {
		return sandbox.Wrap(sandbox.Internal, "harness.write", path, werr)
	}
	return nil
}
