package checkpoint

import (
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Limits bound a manifest: the number of entries, the sum of the files'
// sizes and one file's size. Zero fields take the defaults.
type Limits struct {
	MaxFiles     int
	MaxBytes     int64
	MaxFileBytes int64
}

func (l *Limits) defaults() {
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
}

// ValidateManifest checks a whole manifest without any I/O: every path
// passes CheckPath, once; no path nor any ancestor is excluded by rules,
// and every entry passes its Include; no entry lies under a file or link;
// files carry a well-formed digest, a size within the limits and a mode of
// 0, 0644 or 0755, and nothing else; directories carry nothing; links
// carry a target that passes sandbox.CheckLinkTarget and nothing else; one
// digest has one size. A violation is InvalidArgument naming the path;
// exceeding a limit is ResourceExhausted naming it.
func ValidateManifest(entries []store.Entry, rules Rules, lim Limits) error {
	const op = "checkpoint.manifest"
	lim.defaults()
	if len(entries) > lim.MaxFiles {
		return sandbox.Errorf(sandbox.ResourceExhausted, op, "", "%d entries, over MaxFiles (%d)", len(entries), lim.MaxFiles)
	}
	kinds := make(map[string]store.EntryKind, len(entries))
	sizes := map[string]int64{}
	var total int64
	for _, e := range entries {
		if err := CheckPath(e.Path); err != nil {
			return &sandbox.Error{Code: sandbox.InvalidArgument, Op: op, ID: e.Path, Msg: "bad path", Err: err}
		}
		if _, dup := kinds[e.Path]; dup {
			return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "duplicate path")
		}
		kinds[e.Path] = e.Kind
		switch e.Kind {
		case store.EntryFile:
			if !validDigest(e.Blob) {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "malformed blob digest %q", e.Blob)
			}
			if e.Size < 0 {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "negative size %d", e.Size)
			}
			if e.Mode != 0 && e.Mode != 0o644 && e.Mode != 0o755 {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "mode %#o is neither 0644 nor 0755", e.Mode)
			}
			if e.Target != "" {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "a file has no link target")
			}
			if e.Size > lim.MaxFileBytes {
				return sandbox.Errorf(sandbox.ResourceExhausted, op, e.Path, "file is %d bytes, over MaxFileBytes (%d)", e.Size, lim.MaxFileBytes)
			}
			if s, ok := sizes[e.Blob]; ok && s != e.Size {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "blob %s is listed with sizes %d and %d", e.Blob, s, e.Size)
			}
			sizes[e.Blob] = e.Size
			total += e.Size
			if total > lim.MaxBytes {
				return sandbox.Errorf(sandbox.ResourceExhausted, op, e.Path, "the files pass MaxBytes (%d bytes)", lim.MaxBytes)
			}
		case store.EntryDir:
			if e.Blob != "" || e.Size != 0 || e.Mode != 0 || e.Target != "" {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "a directory carries no blob, size, mode or target")
			}
		case store.EntrySymlink:
			if e.Blob != "" || e.Size != 0 || e.Mode != 0 {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "a link carries no blob, size or mode")
			}
			if err := sandbox.CheckLinkTarget(e.Path, e.Target); err != nil {
				return &sandbox.Error{Code: sandbox.InvalidArgument, Op: op, ID: e.Path, Msg: "bad link target", Err: err}
			}
		default:
			return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "unknown kind %q", e.Kind)
		}
		if rules.excluded(e.Path, e.Kind) || !rules.included(e.Path, e.Kind) {
			return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "the path is excluded (protected)")
		}
	}
	for _, e := range entries {
		for _, a := range ancestors(e.Path) {
			if k, ok := kinds[a]; ok && k != store.EntryDir {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "under %s %q", k, a)
			}
			if rules.excluded(a, store.EntryDir) {
				return sandbox.Errorf(sandbox.InvalidArgument, op, e.Path, "under the excluded (protected) directory %q", a)
			}
		}
	}
	return nil
}

// validDigest reports whether d is a lowercase hex SHA-256.
func validDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
