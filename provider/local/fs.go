package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
)

// fsys is the local file system: every operation goes through an os.Root,
// which refuses (race-free) any path whose symbolic links leave the
// sandbox directory.
type fsys struct{ h *handle }

var _ sandbox.FS = (*fsys)(nil)

func (f *fsys) rel(op, name string) (string, error) {
	rel, err := sandbox.CleanPath(name)
	if err != nil {
		return "", err
	}
	return rel, nil
}

func (f *fsys) ReadFile(ctx context.Context, name string) ([]byte, error) {
	rel, err := f.rel("fs.read", name)
	if err != nil {
		return nil, err
	}
	b, err := f.h.root.ReadFile(rel)
	if err != nil {
		return nil, fsError("fs.read", name, err)
	}
	return b, nil
}

func (f *fsys) WriteFile(ctx context.Context, name string, data []byte) error {
	rel, err := f.rel("fs.write", name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.write", name, "cannot write the workspace root")
	}
	if dir := path.Dir(rel); dir != "." {
		if err := f.h.root.MkdirAll(dir, 0o755); err != nil {
			return fsError("fs.write", name, err)
		}
	}
	// A regular file is written to a temporary file and renamed over the
	// name, never truncated in place: a hard link the agent planted at the
	// name (to a file outside the workspace) is replaced, not written
	// through. An existing file's permissions carry over.
	perm, existed := fs.FileMode(0o644), false
	if fi, err := f.h.root.Lstat(rel); err == nil {
		if !fi.Mode().IsRegular() {
			// A link is followed inside the workspace only (os.Root
			// refuses one that leads out); a directory is an error.
			if err := f.h.root.WriteFile(rel, data, 0o644); err != nil {
				return fsError("fs.write", name, err)
			}
			return nil
		}
		perm, existed = fi.Mode().Perm(), true
	}
	tmp := path.Join(path.Dir(rel), ".corral-write-"+randSuffix())
	w, err := f.h.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fsError("fs.write", name, err)
	}
	_, werr := w.Write(data)
	if cerr := w.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && existed {
		werr = f.h.root.Chmod(tmp, perm) // the umask may have narrowed it
	}
	if werr == nil {
		werr = f.h.root.Rename(tmp, rel)
	}
	if werr != nil {
		_ = f.h.root.Remove(tmp)
		return fsError("fs.write", name, werr)
	}
	return nil
}

// randSuffix is a random name part for temporary files.
func randSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (f *fsys) ReadDir(ctx context.Context, name string) ([]sandbox.DirEntry, error) {
	rel, err := f.rel("fs.list", name)
	if err != nil {
		return nil, err
	}
	d, err := f.h.root.Open(rel)
	if err != nil {
		return nil, fsError("fs.list", name, err)
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return nil, fsError("fs.list", name, err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	base := sandbox.PortablePath(rel)
	out := make([]sandbox.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = sandbox.DirEntry{Name: e.Name(), Path: base + "/" + e.Name(), Type: sandbox.FileTypeOf(e.Type())}
	}
	return out, nil
}

func (f *fsys) MkdirAll(ctx context.Context, name string) error {
	rel, err := f.rel("fs.mkdir", name)
	if err != nil {
		return err
	}
	if err := f.h.root.MkdirAll(rel, 0o755); err != nil {
		return fsError("fs.mkdir", name, err)
	}
	return nil
}

func (f *fsys) RemoveAll(ctx context.Context, name string) error {
	rel, err := f.rel("fs.remove", name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.remove", name, "cannot remove the workspace root")
	}
	if err := f.h.root.RemoveAll(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fsError("fs.remove", name, err)
	}
	return nil
}

func (f *fsys) Rename(ctx context.Context, oldName, newName string) error {
	from, err := f.rel("fs.rename", oldName)
	if err != nil {
		return err
	}
	to, err := f.rel("fs.rename", newName)
	if err != nil {
		return err
	}
	if from == "." || to == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.rename", oldName, "cannot rename the workspace root")
	}
	if err := f.h.root.Rename(from, to); err != nil {
		return fsError("fs.rename", oldName, err)
	}
	return nil
}

func (f *fsys) Stat(ctx context.Context, name string) (sandbox.FileInfo, error) {
	return f.stat("fs.stat", name, f.h.root.Stat)
}

func (f *fsys) Lstat(ctx context.Context, name string) (sandbox.FileInfo, error) {
	return f.stat("fs.lstat", name, f.h.root.Lstat)
}

func (f *fsys) stat(op, name string, stat func(string) (os.FileInfo, error)) (sandbox.FileInfo, error) {
	rel, err := f.rel(op, name)
	if err != nil {
		return sandbox.FileInfo{}, err
	}
	fi, err := stat(rel)
	if err != nil {
		return sandbox.FileInfo{}, fsError(op, name, err)
	}
	return sandbox.FileInfo{
		Name: path.Base(sandbox.PortablePath(rel)),
		Path: sandbox.PortablePath(rel),
		Type: sandbox.FileTypeOf(fi.Mode()),
		Mode: fi.Mode(),
		Size: fi.Size(),
	}, nil
}

func (f *fsys) Exists(ctx context.Context, name string) (bool, error) {
	_, err := f.Stat(ctx, name)
	switch sandbox.CodeOf(err) {
	case sandbox.OK:
		return true, nil
	case sandbox.NotFound:
		return false, nil
	}
	return false, err
}

func (f *fsys) Watch(context.Context, string, func(sandbox.FileEvent)) (func(), error) {
	return nil, sandbox.Unsupported(Name, "watch")
}

// fsError maps an os error to corral's codes. os.Root reports a path that
// leaves the root (through "..", or a symbolic link pointing out) with an
// unexported error whose text says "escapes".
func fsError(op, name string, err error) error {
	var code sandbox.Code
	switch {
	case strings.Contains(err.Error(), "path escapes"):
		return sandbox.EscapeError(op, name)
	case errors.Is(err, fs.ErrNotExist):
		code = sandbox.NotFound
	case errors.Is(err, fs.ErrExist):
		code = sandbox.AlreadyExists
	case errors.Is(err, fs.ErrPermission):
		code = sandbox.PermissionDenied
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTEMPTY):
		code = sandbox.FailedPrecondition
	case errors.Is(err, syscall.ELOOP):
		code = sandbox.InvalidArgument
	default:
		code = sandbox.Internal
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the portable name replaces the host path in the message
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		err = le.Err
	}
	return &sandbox.Error{Code: code, Op: op, ID: name, Err: err}
}

var (
	_ sandbox.LinkFS = (*fsys)(nil)
	_ sandbox.ModeFS = (*fsys)(nil)
)

// Readlink returns a link's target without following it.
func (f *fsys) Readlink(ctx context.Context, name string) (string, error) {
	const op = "fs.readlink"
	rel, err := f.rel(op, name)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, op, name, "the workspace root is not a link")
	}
	t, err := f.h.root.Readlink(rel)
	if err != nil {
		if errors.Is(err, syscall.EINVAL) {
			return "", sandbox.Errorf(sandbox.FailedPrecondition, op, name, "not a symbolic link")
		}
		return "", fsError(op, name, err)
	}
	return t, nil
}

// Symlink makes name a link to target; see sandbox.LinkFS.
func (f *fsys) Symlink(ctx context.Context, target, name string) error {
	const op = "fs.symlink"
	rel, err := f.rel(op, name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, op, name, "cannot replace the workspace root")
	}
	if err := sandbox.CheckLinkTarget(rel, target); err != nil {
		return err
	}
	if err := f.h.root.Symlink(target, rel); err != nil {
		return fsError(op, name, err)
	}
	return nil
}

// Chmod sets a file's or directory's permission bits; a final link is
// refused, not followed.
func (f *fsys) Chmod(ctx context.Context, name string, mode fs.FileMode) error {
	const op = "fs.chmod"
	rel, err := f.rel(op, name)
	if err != nil {
		return err
	}
	fi, err := f.h.root.Lstat(rel)
	if err != nil {
		return fsError(op, name, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, name, "is a symbolic link")
	}
	if err := f.h.root.Chmod(rel, mode&0o777); err != nil {
		return fsError(op, name, err)
	}
	return nil
}
