package sandbox

import (
	"context"
	"io/fs"
	"path"
	"strings"
)

// WorkspaceRoot is the portable root every provider exposes. Paths given to
// an FS or as Command.Dir are under it: "/workspace/src/main.go", or
// relative to it: "src/main.go".
const WorkspaceRoot = "/workspace"

// FS is a sandbox's file system, confined to the workspace root.
//
// Every path is checked by the shared rules: CleanPath rejects empty paths,
// NUL bytes, ".." escapes and absolute paths outside WorkspaceRoot with
// InvalidArgument; a symbolic link whose target leaves the root is rejected
// with PermissionDenied, and nothing outside the root is read or written.
// Operations that act on a link itself (Lstat, Remove, Rename) do not follow
// the final path element.
type FS interface {
	// ReadFile returns the file's contents.
	ReadFile(ctx context.Context, name string) ([]byte, error)
	// WriteFile writes data to the file, creating it and its parent
	// directories as needed and truncating it if it exists.
	WriteFile(ctx context.Context, name string, data []byte) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(ctx context.Context, name string) ([]DirEntry, error)
	// MkdirAll creates a directory and its parents; existing ones are fine.
	MkdirAll(ctx context.Context, name string) error
	// RemoveAll removes a file, link or directory tree; a missing path is
	// fine.
	RemoveAll(ctx context.Context, name string) error
	// Rename moves oldName to newName, replacing newName if it is a file.
	Rename(ctx context.Context, oldName, newName string) error
	// Stat describes the file, following symbolic links. A missing file is
	// an error with code NotFound.
	Stat(ctx context.Context, name string) (FileInfo, error)
	// Lstat describes the file without following a final symbolic link. A
	// missing file is an error with code NotFound; any other failure is its
	// own error, never NotFound.
	Lstat(ctx context.Context, name string) (FileInfo, error)
	// Exists reports whether the path exists (following symbolic links).
	Exists(ctx context.Context, name string) (bool, error)
	// Watch calls fn for each change under the directory until ctx ends or
	// the returned stop function is called. Providers that cannot watch
	// return an UnsupportedCapabilityError.
	Watch(ctx context.Context, name string, fn func(FileEvent)) (stop func(), err error)
}

// FileType is the kind of a file system entry.
type FileType string

// File types.
const (
	TypeFile    FileType = "file"
	TypeDir     FileType = "dir"
	TypeSymlink FileType = "symlink"
	TypeOther   FileType = "other"
)

// FileTypeOf classifies a file mode.
func FileTypeOf(m fs.FileMode) FileType {
	switch {
	case m.IsRegular():
		return TypeFile
	case m.IsDir():
		return TypeDir
	case m&fs.ModeSymlink != 0:
		return TypeSymlink
	}
	return TypeOther
}

// DirEntry is one entry of a directory listing.
type DirEntry struct {
	Name string   `json:"name"` // base name
	Path string   `json:"path"` // portable path: the listed directory + "/" + Name
	Type FileType `json:"type"` // the entry itself, not what a link points to
}

// FileInfo describes a file system entry.
type FileInfo struct {
	Name string      `json:"name"`
	Path string      `json:"path"` // portable path under WorkspaceRoot
	Type FileType    `json:"type"`
	Mode fs.FileMode `json:"mode"` // includes the type bits
	Size int64       `json:"size"`
}

// FileEvent is a change reported by FS.Watch.
type FileEvent struct {
	Op   string `json:"op"`   // "create", "change" or "delete"
	Path string `json:"path"` // portable path
}

// CleanPath validates a path given to an FS or as a working directory and
// returns it relative to the workspace root, "." for the root itself. It is
// the one lexical check every provider applies; see FS for the rules.
func CleanPath(name string) (string, error) {
	switch {
	case name == "":
		return "", Errorf(InvalidArgument, "path", name, "empty path")
	case strings.IndexByte(name, 0) >= 0:
		return "", Errorf(InvalidArgument, "path", name, "path contains a NUL byte")
	}
	if path.IsAbs(name) {
		p := path.Clean(name)
		if p == WorkspaceRoot {
			return ".", nil
		}
		if rel, ok := strings.CutPrefix(p, WorkspaceRoot+"/"); ok {
			return rel, nil
		}
		return "", Errorf(InvalidArgument, "path", name, "absolute path outside the workspace %s", WorkspaceRoot)
	}
	p := path.Clean(name)
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", Errorf(InvalidArgument, "path", name, "path escapes the workspace")
	}
	return p, nil
}

// PortablePath returns the "/workspace/..." form of a path relative to the
// root (as CleanPath returns it).
func PortablePath(rel string) string {
	if rel == "." || rel == "" {
		return WorkspaceRoot
	}
	return WorkspaceRoot + "/" + rel
}

// MapPath validates name and returns the real path inside the sandbox,
// given the real path of the workspace root. It is how a working directory
// or a CLI's file argument reaches providers whose root is not /workspace.
func MapPath(realRoot, name string) (string, error) {
	rel, err := CleanPath(name)
	if err != nil {
		return "", err
	}
	if rel == "." {
		return realRoot, nil
	}
	return path.Join(realRoot, rel), nil
}

// EscapeError returns the PermissionDenied error for a path whose symbolic
// links lead outside the workspace.
func EscapeError(op, name string) error {
	return Errorf(PermissionDenied, op, name, "path resolves outside the workspace through a symbolic link")
}
