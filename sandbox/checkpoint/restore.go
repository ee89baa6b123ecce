package checkpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"slices"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Rules are the capture's rules: they reject manifest entries on
	// excluded paths, and the destination's excluded (and not included)
	// paths are protected, never written nor removed.
	Rules Rules
	// Limits bound the manifest (and so the memory the preloaded blobs
	// take).
	Limits Limits
}

// RestoreResult counts what Restore did.
type RestoreResult struct {
	Removed  int `json:"removed"`
	Dirs     int `json:"dirs"`
	Files    int `json:"files"`
	Symlinks int `json:"symlinks"`
	Chmods   int `json:"chmods"`
}

// Restore makes the directory root of fsys equal to the manifest entries,
// leaving protected paths alone. In order:
//
//  1. The whole manifest is validated (ValidateManifest) and the FS checked
//     for what the manifest needs: links need sandbox.LinkFS and 0755 files
//     sandbox.ModeFS (FailedPrecondition otherwise).
//  2. Every blob is read and verified (size and SHA-256): a missing blob is
//     NotFound, a wrong one FailedPrecondition wrapping store.ErrBlobDigest.
//  3. The destination is scanned without following links; excluded and not
//     included paths are protected and not entered, and so are names no
//     manifest can hold (not valid UTF-8, say).
//  4. A plan is made: removes (entries absent from the manifest or of
//     another kind, shallowest first, never a protected path nor a directory
//     holding one), directories, file writes with their modes, and links.
//     A manifest entry that would replace a protected path or a directory
//     holding one is FailedPrecondition.
//  5. The plan is applied.
//
// A failure in steps 1–4 changes nothing. No write goes through a link that
// was in the destination: such a link is removed first (a link is of
// another kind than the directory or file the manifest wants there). A
// process inside the sandbox that changes the tree during the restore is
// not guarded against.
func Restore(ctx context.Context, fsys sandbox.FS, root string, entries []store.Entry, blobs store.BlobStore, opts RestoreOptions) (RestoreResult, error) {
	const op = "checkpoint.restore"
	if _, err := sandbox.CleanPath(root); err != nil {
		return RestoreResult{}, err
	}
	if err := ValidateManifest(entries, opts.Rules, opts.Limits); err != nil {
		return RestoreResult{}, err
	}
	links, _ := fsys.(sandbox.LinkFS)
	modes, _ := fsys.(sandbox.ModeFS)
	for _, e := range entries {
		if e.Kind == store.EntrySymlink && links == nil {
			return RestoreResult{}, sandbox.Errorf(sandbox.FailedPrecondition, op, e.Path, "the manifest has symbolic links and the file system cannot make them (no sandbox.LinkFS)")
		}
		if e.Kind == store.EntryFile && e.Mode == 0o755 && modes == nil {
			return RestoreResult{}, sandbox.Errorf(sandbox.FailedPrecondition, op, e.Path, "the manifest has executables and the file system cannot set modes (no sandbox.ModeFS)")
		}
	}
	if err := checkRoot(ctx, fsys, root, op); err != nil {
		return RestoreResult{}, err
	}
	data, err := preload(ctx, entries, blobs)
	if err != nil {
		return RestoreResult{}, err
	}
	r := &restorer{fsys: fsys, links: links, modes: modes, root: root, rules: opts.Rules,
		want: map[string]store.Entry{}, have: map[string]*node{}}
	for _, e := range entries {
		r.want[e.Path] = e
		for _, a := range ancestors(e.Path) {
			if _, ok := r.want[a]; !ok {
				r.want[a] = store.Entry{Path: a, Kind: store.EntryDir}
			}
		}
	}
	if err := r.scan(ctx, ""); err != nil {
		return RestoreResult{}, err
	}
	p, err := r.plan(modes != nil)
	if err != nil {
		return RestoreResult{}, err
	}
	return r.apply(ctx, p, data)
}

// checkRoot requires root to be a directory (following a link at root).
func checkRoot(ctx context.Context, fsys sandbox.FS, root, op string) error {
	fi, err := fsys.Lstat(ctx, root)
	if err != nil {
		if sandbox.CodeOf(err) == sandbox.Unimplemented {
			return &sandbox.Error{Code: sandbox.Unimplemented, Op: op, ID: root, Msg: "the file system needs Lstat", Err: err}
		}
		return sandbox.Wrap(sandbox.Internal, op, root, err)
	}
	if fi.Type == sandbox.TypeSymlink {
		if fi, err = fsys.Stat(ctx, root); err != nil {
			return sandbox.Wrap(sandbox.Internal, op, root, err)
		}
	}
	if fi.Type != sandbox.TypeDir {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, root, "the workspace root is not a directory")
	}
	return nil
}

// preload reads and verifies every distinct blob of the manifest.
func preload(ctx context.Context, entries []store.Entry, blobs store.BlobStore) (map[string][]byte, error) {
	const op = "checkpoint.restore"
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Kind != store.EntryFile {
			continue
		}
		if _, ok := out[e.Blob]; ok {
			continue
		}
		rc, err := blobs.OpenBlob(ctx, e.Blob)
		if err != nil {
			return nil, sandbox.Wrap(sandbox.Unavailable, op, e.Path, err)
		}
		b, err := io.ReadAll(io.LimitReader(rc, e.Size+1))
		rc.Close()
		if err != nil {
			return nil, sandbox.Wrap(sandbox.Unavailable, op, e.Path, err)
		}
		if int64(len(b)) != e.Size {
			return nil, &sandbox.Error{Code: sandbox.FailedPrecondition, Op: op, ID: e.Path,
				Msg: "blob " + e.Blob + " does not have the listed size", Err: store.ErrBlobDigest}
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != e.Blob {
			return nil, &sandbox.Error{Code: sandbox.FailedPrecondition, Op: op, ID: e.Path,
				Msg: "blob " + e.Blob + " does not hash to its digest", Err: store.ErrBlobDigest}
		}
		out[e.Blob] = b
	}
	return out, nil
}

// node is one path found in the destination.
type node struct {
	typ       sandbox.FileType
	protected bool   // excluded or not included: never touched
	holds     bool   // a directory with a protected path under it
	perm      uint32 // a file's permission bits, when the manifest wants a file there
	target    string // a link's target, when the manifest wants a link there
}

type restorer struct {
	fsys  sandbox.FS
	links sandbox.LinkFS
	modes sandbox.ModeFS
	root  string
	rules Rules
	want  map[string]store.Entry // manifest entries and their implied directories
	have  map[string]*node       // the destination
}

// scan records the destination under dir ("" for the root).
func (r *restorer) scan(ctx context.Context, dir string) error {
	const op = "checkpoint.restore"
	if err := ctx.Err(); err != nil {
		return sandbox.Wrap(sandbox.Canceled, op, dir, err)
	}
	list, err := r.fsys.ReadDir(ctx, join(r.root, dir))
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, op, dir, err)
	}
	if dir != "" && len(list) == 0 && !r.rules.included(dir, store.EntryDir) {
		r.protect(dir)
	}
	for _, de := range list {
		rel := de.Name
		if dir != "" {
			rel = dir + "/" + de.Name
		}
		n := &node{typ: de.Type}
		r.have[rel] = n
		kind := kindOrOther(de.Type)
		if CheckPath(rel) != nil || r.rules.excluded(rel, kind) ||
			(de.Type != sandbox.TypeDir && !r.rules.included(rel, kind)) {
			// Names no manifest can hold (not UTF-8, say) are protected too:
			// restore cannot tell what they are for.
			r.protect(rel)
			continue
		}
		w, wanted := r.want[rel]
		switch {
		case de.Type == sandbox.TypeDir:
			if err := r.scan(ctx, rel); err != nil {
				return err
			}
		case de.Type == sandbox.TypeFile && wanted && w.Kind == store.EntryFile:
			fi, err := r.fsys.Lstat(ctx, join(r.root, rel))
			if err != nil {
				return sandbox.Wrap(sandbox.Internal, op, rel, err)
			}
			if fi.Type != sandbox.TypeFile {
				return sandbox.Errorf(sandbox.FailedPrecondition, op, rel, "changed during the restore")
			}
			n.perm = uint32(fi.Mode.Perm())
		case de.Type == sandbox.TypeSymlink && wanted && w.Kind == store.EntrySymlink:
			t, err := r.links.Readlink(ctx, join(r.root, rel))
			if err != nil {
				return sandbox.Wrap(sandbox.Internal, op, rel, err)
			}
			n.target = t
		}
	}
	return nil
}

// protect marks rel protected and its ancestors as holding a protected
// path.
func (r *restorer) protect(rel string) {
	if n := r.have[rel]; n != nil {
		n.protected = true
	} else {
		r.have[rel] = &node{typ: sandbox.TypeDir, protected: true}
	}
	for _, a := range ancestors(rel) {
		if n := r.have[a]; n != nil {
			n.holds = true
		}
	}
}

// plan is what apply does, in order.
type plan struct {
	removes []string
	mkdirs  []string
	writes  []store.Entry
	chmod   map[string]bool // writes that need a chmod after
	links   []store.Entry
}

func (r *restorer) plan(canChmod bool) (*plan, error) {
	const op = "checkpoint.restore"
	p := &plan{chmod: map[string]bool{}}
	paths := sortedKeys(r.have)
	for _, rel := range paths {
		n := r.have[rel]
		if !n.protected {
			continue
		}
		if w, ok := r.want[rel]; ok && (w.Kind != store.EntryDir || n.typ != sandbox.TypeDir) {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, rel, "the manifest would replace a protected path")
		}
		for _, a := range ancestors(rel) {
			if w, ok := r.want[a]; ok && w.Kind != store.EntryDir {
				return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, a, "the manifest would replace a directory holding the protected path %q", rel)
			}
		}
	}
	removed := map[string]bool{}
	under := func(rel string) bool {
		for _, a := range ancestors(rel) {
			if removed[a] {
				return true
			}
		}
		return false
	}
	for _, rel := range paths {
		n := r.have[rel]
		if n.protected || n.holds || under(rel) {
			continue
		}
		w, ok := r.want[rel]
		if ok && sameKind(n, w) {
			continue
		}
		removed[rel] = true
		p.removes = append(p.removes, rel)
	}
	for _, rel := range sortedKeys(r.want) {
		w := r.want[rel]
		n := r.have[rel]
		kept := n != nil && !removed[rel] && !under(rel)
		switch w.Kind {
		case store.EntryDir:
			if !kept {
				p.mkdirs = append(p.mkdirs, rel)
			}
		case store.EntryFile:
			p.writes = append(p.writes, w)
			if fileMode(w) == 0o755 || kept && n.perm != uint32(fileMode(w)) {
				if !canChmod {
					return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, rel, "the file's mode must change and the file system cannot set modes (no sandbox.ModeFS)")
				}
				p.chmod[rel] = true
			}
		case store.EntrySymlink:
			if !kept {
				p.links = append(p.links, w)
			}
		}
	}
	return p, nil
}

// sameKind reports whether an existing node can stay for the wanted entry
// (a file is rewritten in place; a link must already have the target).
func sameKind(n *node, w store.Entry) bool {
	switch w.Kind {
	case store.EntryDir:
		return n.typ == sandbox.TypeDir
	case store.EntryFile:
		return n.typ == sandbox.TypeFile
	case store.EntrySymlink:
		return n.typ == sandbox.TypeSymlink && n.target == w.Target
	}
	return false
}

func (r *restorer) apply(ctx context.Context, p *plan, data map[string][]byte) (RestoreResult, error) {
	const op = "checkpoint.restore"
	var res RestoreResult
	fail := func(rel string, err error) (RestoreResult, error) {
		return res, sandbox.Wrap(sandbox.Internal, op, rel, err)
	}
	for _, rel := range p.removes {
		if err := r.fsys.RemoveAll(ctx, join(r.root, rel)); err != nil {
			return fail(rel, err)
		}
		res.Removed++
	}
	for _, rel := range p.mkdirs {
		if err := r.fsys.MkdirAll(ctx, join(r.root, rel)); err != nil {
			return fail(rel, err)
		}
		res.Dirs++
	}
	for _, w := range p.writes {
		name := join(r.root, w.Path)
		if err := r.fsys.WriteFile(ctx, name, data[w.Blob]); err != nil {
			return fail(w.Path, err)
		}
		res.Files++
		if p.chmod[w.Path] {
			if err := r.modes.Chmod(ctx, name, fileMode(w)); err != nil {
				return fail(w.Path, err)
			}
			res.Chmods++
		}
	}
	for _, w := range p.links {
		if err := r.links.Symlink(ctx, w.Target, join(r.root, w.Path)); err != nil {
			return fail(w.Path, err)
		}
		res.Symlinks++
	}
	return res, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	return keys
}
