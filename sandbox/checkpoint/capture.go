package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// CaptureOptions tune Capture.
type CaptureOptions struct {
	// Rules choose the paths; the zero value is the default rule set.
	Rules Rules
	// Secrets are values zeroed in every file before it is hashed (see
	// Redact). A path or link target holding one is skipped and reported.
	Secrets []string
	// MaxFiles bounds the number of entries (files, links and empty
	// directories). Default DefaultMaxFiles.
	MaxFiles int
	// MaxBytes bounds the sum of the files' sizes. Default DefaultMaxBytes.
	MaxBytes int64
	// MaxFileBytes bounds one file's size. Default DefaultMaxFileBytes.
	MaxFileBytes int64
}

func (o *CaptureOptions) defaults() {
	if o.MaxFiles <= 0 {
		o.MaxFiles = DefaultMaxFiles
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
}

// Skipped is a path a capture left out for a reason the caller should see
// (excluded paths are not reported: leaving them out is the rule).
type Skipped struct {
	// Path is relative to the captured root.
	Path string `json:"path"`
	// Type is what the path is.
	Type sandbox.FileType `json:"type"`
	// Reason says why, for a person.
	Reason string `json:"reason"`
}

// The reasons of Skipped.
const (
	ReasonSpecial        = "not a regular file, directory or symbolic link"
	ReasonLinkUnreadable = "the file system cannot read symbolic links (no sandbox.LinkFS, or its Readlink is unimplemented)"
	ReasonLinkEscapes    = "link target is absolute, not in clean form or leaves the workspace"
	ReasonNotUTF8        = "name is not valid UTF-8"
	ReasonSecretInPath   = "path or link target contains a secret value"
	ReasonVanished       = "vanished during the capture"
)

// Result is what Capture found.
type Result struct {
	// Entries are the checkpoint's entries, sorted by path bytes.
	Entries []store.Entry `json:"entries"`
	// Files, Dirs and Symlinks count the entries by kind.
	Files    int `json:"files"`
	Dirs     int `json:"dirs"`
	Symlinks int `json:"symlinks"`
	// Bytes is the sum of the files' sizes (store.Checkpoint.Bytes).
	Bytes int64 `json:"bytes"`
	// BlobsPut counts the blobs this capture stored (the others were
	// already in the blob store).
	BlobsPut int `json:"blobsPut"`
	// Skipped lists what was left out for a reason, sorted by path.
	Skipped []Skipped `json:"skipped,omitempty"`
}

// Capture walks the directory root of fsys (a path the FS accepts, such as
// sandbox.WorkspaceRoot) and returns its entries, storing each file's
// redacted bytes in blobs under their SHA-256 (a blob is put only when
// HasBlob misses, once per digest per capture). The package documentation
// says what is kept and what is skipped.
//
// Excluded children are skipped before they are examined. A bound of opts
// that is exceeded is ResourceExhausted naming the bound and the path. An
// FS whose Lstat is Unimplemented gives Unimplemented; a root that is not a
// directory gives FailedPrecondition.
func Capture(ctx context.Context, fsys sandbox.FS, root string, opts CaptureOptions, blobs store.BlobStore) (Result, error) {
	const op = "checkpoint.capture"
	opts.defaults()
	if _, err := sandbox.CleanPath(root); err != nil {
		return Result{}, err
	}
	fi, err := fsys.Lstat(ctx, root)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.Unimplemented {
			return Result{}, &sandbox.Error{Code: sandbox.Unimplemented, Op: op, ID: root, Msg: "the file system needs Lstat", Err: err}
		}
		return Result{}, sandbox.Wrap(sandbox.Internal, op, root, err)
	}
	if fi.Type != sandbox.TypeDir {
		if fi.Type == sandbox.TypeSymlink {
			if fi, err = fsys.Stat(ctx, root); err != nil {
				return Result{}, sandbox.Wrap(sandbox.Internal, op, root, err)
			}
		}
		if fi.Type != sandbox.TypeDir {
			return Result{}, sandbox.Errorf(sandbox.FailedPrecondition, op, root, "the workspace root is not a directory")
		}
	}
	links, _ := fsys.(sandbox.LinkFS)
	c := &capture{fsys: fsys, links: links, root: root, opts: opts, blobs: blobs, seen: map[string]bool{}}
	if err := c.walk(ctx, ""); err != nil {
		return Result{}, err
	}
	slices.SortFunc(c.res.Entries, func(a, b store.Entry) int { return strings.Compare(a.Path, b.Path) })
	slices.SortFunc(c.res.Skipped, func(a, b Skipped) int { return strings.Compare(a.Path, b.Path) })
	return c.res, nil
}

type capture struct {
	fsys  sandbox.FS
	links sandbox.LinkFS
	root  string
	opts  CaptureOptions
	blobs store.BlobStore
	seen  map[string]bool // digests checked or put in this capture
	res   Result
}

func (c *capture) skip(rel string, t sandbox.FileType, reason string) {
	c.res.Skipped = append(c.res.Skipped, Skipped{Path: rel, Type: t, Reason: reason})
}

// add appends an entry, enforcing MaxFiles.
func (c *capture) add(e store.Entry) error {
	if len(c.res.Entries) >= c.opts.MaxFiles {
		return sandbox.Errorf(sandbox.ResourceExhausted, "checkpoint.capture", e.Path,
			"more than MaxFiles (%d) entries", c.opts.MaxFiles)
	}
	c.res.Entries = append(c.res.Entries, e)
	switch e.Kind {
	case store.EntryFile:
		c.res.Files++
	case store.EntryDir:
		c.res.Dirs++
	case store.EntrySymlink:
		c.res.Symlinks++
	}
	return nil
}

// walk captures the directory dir ("" for the root). A directory that
// yields no entry (it is empty, or everything in it is excluded or skipped)
// is listed itself, so that it exists after a restore.
func (c *capture) walk(ctx context.Context, dir string) error {
	const op = "checkpoint.capture"
	if err := ctx.Err(); err != nil {
		return sandbox.Wrap(sandbox.Canceled, op, dir, err)
	}
	list, err := c.fsys.ReadDir(ctx, join(c.root, dir))
	if err != nil {
		if dir != "" && sandbox.CodeOf(err) == sandbox.NotFound {
			c.skip(dir, sandbox.TypeDir, ReasonVanished)
			return nil
		}
		return sandbox.Wrap(sandbox.Internal, op, dir, err)
	}
	before := len(c.res.Entries)
	for _, de := range list {
		rel := de.Name
		if dir != "" {
			rel = dir + "/" + de.Name
		}
		if c.opts.Rules.excluded(rel, kindOrOther(de.Type)) {
			continue
		}
		if !utf8.ValidString(de.Name) {
			c.skip(rel, de.Type, ReasonNotUTF8)
			continue
		}
		if err := CheckPath(rel); err != nil {
			return sandbox.Errorf(sandbox.Internal, op, rel, "the file system listed an invalid name %q", de.Name)
		}
		if err := c.child(ctx, rel); err != nil {
			return err
		}
	}
	if len(c.res.Entries) > before || dir == "" || !c.opts.Rules.included(dir, store.EntryDir) {
		return nil
	}
	return c.add(store.Entry{Path: dir, Kind: store.EntryDir})
}

// child captures one listed, not excluded path.
func (c *capture) child(ctx context.Context, rel string) error {
	const op = "checkpoint.capture"
	name := join(c.root, rel)
	fi, err := c.fsys.Lstat(ctx, name)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			c.skip(rel, sandbox.TypeOther, ReasonVanished)
			return nil
		}
		return sandbox.Wrap(sandbox.Internal, op, rel, err)
	}
	kind, ok := kindOf(fi.Type)
	if !ok {
		c.skip(rel, fi.Type, ReasonSpecial)
		return nil
	}
	if containsSecret(rel, c.opts.Secrets) {
		c.skip(rel, fi.Type, ReasonSecretInPath)
		return nil
	}
	if kind == store.EntryDir {
		return c.walk(ctx, rel)
	}
	if !c.opts.Rules.included(rel, kind) {
		return nil
	}
	if kind == store.EntrySymlink {
		return c.link(ctx, rel, name)
	}
	return c.file(ctx, rel, name, fi)
}

func (c *capture) link(ctx context.Context, rel, name string) error {
	if c.links == nil {
		c.skip(rel, sandbox.TypeSymlink, ReasonLinkUnreadable)
		return nil
	}
	target, err := c.links.Readlink(ctx, name)
	if err != nil {
		switch sandbox.CodeOf(err) {
		case sandbox.NotFound:
			c.skip(rel, sandbox.TypeSymlink, ReasonVanished)
			return nil
		case sandbox.Unimplemented:
			c.skip(rel, sandbox.TypeSymlink, ReasonLinkUnreadable)
			return nil
		}
		return sandbox.Wrap(sandbox.Internal, "checkpoint.capture", rel, err)
	}
	target = tidyTarget(target)
	if sandbox.CheckLinkTarget(rel, target) != nil {
		c.skip(rel, sandbox.TypeSymlink, ReasonLinkEscapes)
		return nil
	}
	if containsSecret(target, c.opts.Secrets) {
		c.skip(rel, sandbox.TypeSymlink, ReasonSecretInPath)
		return nil
	}
	return c.add(store.Entry{Path: rel, Kind: store.EntrySymlink, Target: target})
}

// tidyTarget drops what never changes where a relative link leads: "."
// and empty segments and a trailing "/". It keeps every ".." where it is
// (removing "dir/.." would change a link through a linked dir).
func tidyTarget(t string) string {
	if t == "" || path.IsAbs(t) {
		return t
	}
	var segs []string
	for seg := range strings.SplitSeq(t, "/") {
		if seg != "" && seg != "." {
			segs = append(segs, seg)
		}
	}
	if len(segs) == 0 {
		return "."
	}
	return strings.Join(segs, "/")
}

func (c *capture) file(ctx context.Context, rel, name string, fi sandbox.FileInfo) error {
	const op = "checkpoint.capture"
	if fi.Size > c.opts.MaxFileBytes {
		return sandbox.Errorf(sandbox.ResourceExhausted, op, rel, "file is %d bytes, over MaxFileBytes (%d)", fi.Size, c.opts.MaxFileBytes)
	}
	data, err := c.fsys.ReadFile(ctx, name)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.NotFound {
			c.skip(rel, sandbox.TypeFile, ReasonVanished)
			return nil
		}
		return sandbox.Wrap(sandbox.Internal, op, rel, err)
	}
	size := int64(len(data))
	if size > c.opts.MaxFileBytes {
		return sandbox.Errorf(sandbox.ResourceExhausted, op, rel, "file is %d bytes, over MaxFileBytes (%d)", size, c.opts.MaxFileBytes)
	}
	if c.res.Bytes+size > c.opts.MaxBytes {
		return sandbox.Errorf(sandbox.ResourceExhausted, op, rel, "the files pass MaxBytes (%d bytes)", c.opts.MaxBytes)
	}
	data = Redact(data, c.opts.Secrets)
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if err := c.put(ctx, rel, digest, data); err != nil {
		return err
	}
	e := store.Entry{Path: rel, Kind: store.EntryFile, Blob: digest, Size: size}
	if fi.Mode&0o111 != 0 {
		e.Mode = 0o755
	}
	if err := c.add(e); err != nil {
		return err
	}
	c.res.Bytes += size
	return nil
}

// put stores a blob unless this capture has already seen its digest or
// the store has it.
func (c *capture) put(ctx context.Context, rel, digest string, data []byte) error {
	const op = "checkpoint.capture"
	if c.seen[digest] {
		return nil
	}
	has, err := c.blobs.HasBlob(ctx, digest)
	if err != nil {
		return sandbox.Wrap(sandbox.Unavailable, op, rel, err)
	}
	if !has {
		if err := c.blobs.PutBlob(ctx, digest, bytes.NewReader(data), int64(len(data))); err != nil {
			return sandbox.Wrap(sandbox.Unavailable, op, rel, err)
		}
		c.res.BlobsPut++
	}
	c.seen[digest] = true
	return nil
}

// fileMode is the mode a file entry restores with.
func fileMode(e store.Entry) fs.FileMode {
	if e.Mode == 0o755 {
		return 0o755
	}
	return 0o644
}
