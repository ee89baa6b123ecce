package checkpoint

import (
	"path"
	"strings"
	"unicode/utf8"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// The default bounds of a capture and a restore.
const (
	DefaultMaxFiles     = 20_000
	DefaultMaxBytes     = 1 << 30
	DefaultMaxFileBytes = 256 << 20
)

// Rules choose the paths of a checkpoint. The zero value is the default
// rule set. Paths given to the functions are relative to the captured root,
// "/"-separated, as in store.Entry.Path.
type Rules struct {
	// Exclude reports whether a path is left out; an excluded directory is
	// not entered. It is asked before the path is examined (kind is what
	// the directory listing says). nil means DefaultExclude with Projected.
	// A supplied Exclude replaces the default entirely.
	Exclude func(rel string, kind store.EntryKind) bool
	// Include, when set, must return true for a file, link or empty
	// directory to be kept; it keeps the exclude rule (default or
	// supplied). It is not asked about directories that have entries.
	Include func(rel string, kind store.EntryKind) bool
	// Projected names the files corral itself projected into the workspace
	// (ProjectedFiles), left out by the default exclude. Ignored when
	// Exclude is set.
	Projected []string
}

// ProjectedFiles returns the workspace-relative paths of the agent files
// corral's bootstrap writes into the workspace root for ws: AGENTS.md with
// CLAUDE.md and GEMINI.md linked (or copied) to it, when the workspace has
// an AGENTS.md document; nil otherwise. A workspace's own AGENTS.md (there
// is no document) is the user's, and is captured.
func ProjectedFiles(ws *sandbox.Workspace) []string {
	if ws.AgentsDocument() == "" {
		return nil
	}
	return []string{"AGENTS.md", "CLAUDE.md", "GEMINI.md"}
}

// DefaultExclude is the default exclude rule: a path with a ".git" or
// "node_modules" segment, or a segment starting with ".env".
func DefaultExclude(rel string, _ store.EntryKind) bool {
	for seg := range strings.SplitSeq(rel, "/") {
		if seg == ".git" || seg == "node_modules" || strings.HasPrefix(seg, ".env") {
			return true
		}
	}
	return false
}

// excluded reports whether rel is left out by the rules.
func (r Rules) excluded(rel string, kind store.EntryKind) bool {
	if r.Exclude != nil {
		return r.Exclude(rel, kind)
	}
	if DefaultExclude(rel, kind) {
		return true
	}
	for _, p := range r.Projected {
		if p == rel {
			return true
		}
	}
	return false
}

// included reports whether a leaf (file, link or empty directory) is kept.
func (r Rules) included(rel string, kind store.EntryKind) bool {
	return r.Include == nil || r.Include(rel, kind)
}

// kindOf maps a file type to an entry kind; ok is false for other types.
func kindOf(t sandbox.FileType) (store.EntryKind, bool) {
	switch t {
	case sandbox.TypeFile:
		return store.EntryFile, true
	case sandbox.TypeDir:
		return store.EntryDir, true
	case sandbox.TypeSymlink:
		return store.EntrySymlink, true
	}
	return "", false
}

// kindOrOther is kindOf with "other" for the rest, for the exclude rule.
func kindOrOther(t sandbox.FileType) store.EntryKind {
	if k, ok := kindOf(t); ok {
		return k
	}
	return store.EntryKind("other")
}

// CheckPath reports whether p is a valid entry path: non-empty valid UTF-8,
// relative, no "\" or NUL, no trailing "/", and no empty, "." or ".."
// segment. A violation is InvalidArgument.
func CheckPath(p string) error {
	const op = "checkpoint.path"
	switch {
	case p == "":
		return sandbox.Errorf(sandbox.InvalidArgument, op, p, "empty path")
	case !utf8.ValidString(p):
		return sandbox.Errorf(sandbox.InvalidArgument, op, p, "path is not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return sandbox.Errorf(sandbox.InvalidArgument, op, p, "path contains a NUL byte")
	case strings.IndexByte(p, '\\') >= 0:
		return sandbox.Errorf(sandbox.InvalidArgument, op, p, "path contains a backslash")
	case path.IsAbs(p):
		return sandbox.Errorf(sandbox.InvalidArgument, op, p, "absolute path")
	case strings.HasSuffix(p, "/"):
		return sandbox.Errorf(sandbox.InvalidArgument, op, p, "trailing slash")
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return sandbox.Errorf(sandbox.InvalidArgument, op, p, "empty, \".\" or \"..\" segment")
		}
	}
	return nil
}

// ancestors returns the proper ancestors of a valid path, shallowest first.
func ancestors(p string) []string {
	var out []string
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}

// join returns the FS path of rel under root.
func join(root, rel string) string {
	if rel == "" || rel == "." {
		return root
	}
	return path.Join(root, rel)
}
