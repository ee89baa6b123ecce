package checkpoint_test

import (
	"context"
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/checkpoint"
	"github.com/d10ffeed/corral/store"
)

// plainFS hides the optional interfaces of the FS it holds.
type plainFS struct{ sandbox.FS }

// linkOnlyFS keeps LinkFS but hides ModeFS.
type linkOnlyFS struct {
	sandbox.FS
	sandbox.LinkFS
}

// hostileDest is the destination every hostile manifest meets: plain
// files, a directory holding a protected node_modules, a protected .git,
// and a protected .env that is a link planted to point outside.
var hostileDest = []string{
	"keep.txt=keep",
	"dir/a.txt=a",
	"pkg/node_modules/m.js=m",
	".git/HEAD=ref",
	".env -> ../outside",
	"bin/tool*=#!/bin/sh\n",
}

func TestHostileManifests(t *testing.T) {
	const good = "good"
	gd := digestOf([]byte(good))
	other := digestOf([]byte("other")) // planted with the bytes "evil"
	missing := digestOf([]byte("never stored"))
	file := func(p string) store.Entry { return store.Entry{Path: p, Kind: store.EntryFile, Blob: gd, Size: 4} }
	link := func(p, target string) store.Entry {
		return store.Entry{Path: p, Kind: store.EntrySymlink, Target: target}
	}
	dir := func(p string) store.Entry { return store.Entry{Path: p, Kind: store.EntryDir} }
	with := func(e store.Entry, f func(*store.Entry)) store.Entry { f(&e); return e }

	type tc struct {
		name    string
		entries []store.Entry
		code    sandbox.Code
		opts    checkpoint.RestoreOptions
		wrap    func(sandbox.FS) sandbox.FS
	}
	cases := []tc{
		{name: "traversal", entries: []store.Entry{file("../x")}, code: sandbox.InvalidArgument},
		{name: "traversal inside", entries: []store.Entry{file("a/../../x")}, code: sandbox.InvalidArgument},
		{name: "dotdot back in", entries: []store.Entry{file("dir/../keep.txt")}, code: sandbox.InvalidArgument},
		{name: "absolute", entries: []store.Entry{file("/etc/passwd")}, code: sandbox.InvalidArgument},
		{name: "absolute workspace", entries: []store.Entry{file("/workspace/x")}, code: sandbox.InvalidArgument},
		{name: "backslash", entries: []store.Entry{file(`a\b`)}, code: sandbox.InvalidArgument},
		{name: "backslash traversal", entries: []store.Entry{file(`..\x`)}, code: sandbox.InvalidArgument},
		{name: "NUL", entries: []store.Entry{file("a\x00b")}, code: sandbox.InvalidArgument},
		{name: "empty path", entries: []store.Entry{file("")}, code: sandbox.InvalidArgument},
		{name: "empty segment", entries: []store.Entry{file("a//b")}, code: sandbox.InvalidArgument},
		{name: "dot segment", entries: []store.Entry{file("./a")}, code: sandbox.InvalidArgument},
		{name: "trailing slash", entries: []store.Entry{file("a/")}, code: sandbox.InvalidArgument},
		{name: "not UTF-8", entries: []store.Entry{file("a\xffb")}, code: sandbox.InvalidArgument},
		{name: "duplicate", entries: []store.Entry{file("x"), file("x")}, code: sandbox.InvalidArgument},
		{name: "duplicate of another kind", entries: []store.Entry{file("x"), dir("x")}, code: sandbox.InvalidArgument},
		{name: "entry under a file", entries: []store.Entry{file("x"), file("x/y")}, code: sandbox.InvalidArgument},
		{name: "entry under a link", entries: []store.Entry{link("l", "dir"), file("l/y")}, code: sandbox.InvalidArgument},
		{name: "write through a manifest link", entries: []store.Entry{link("l", "../outside"), file("l/secret.txt")}, code: sandbox.InvalidArgument},
		{name: "link escaping", entries: []store.Entry{link("l", "../outside")}, code: sandbox.InvalidArgument},
		{name: "link escaping from below", entries: []store.Entry{link("d/l", "../../outside")}, code: sandbox.InvalidArgument},
		{name: "link absolute", entries: []store.Entry{link("l", "/etc")}, code: sandbox.InvalidArgument},
		{name: "link climbing through a name", entries: []store.Entry{link("l", "dir/../..")}, code: sandbox.InvalidArgument},
		{name: "link not clean", entries: []store.Entry{link("l", "./keep.txt")}, code: sandbox.InvalidArgument},
		{name: "link with NUL", entries: []store.Entry{link("l", "a\x00b")}, code: sandbox.InvalidArgument},
		{name: "link without target", entries: []store.Entry{link("l", "")}, code: sandbox.InvalidArgument},
		{name: "link with a blob", entries: []store.Entry{with(link("l", "keep.txt"), func(e *store.Entry) { e.Blob = gd })}, code: sandbox.InvalidArgument},
		{name: "digest uppercase", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Blob = strings.ToUpper(gd) })}, code: sandbox.InvalidArgument},
		{name: "digest short", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Blob = gd[:63] })}, code: sandbox.InvalidArgument},
		{name: "digest as a path", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Blob = "../../" + gd[:58] })}, code: sandbox.InvalidArgument},
		{name: "wrong size", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Size = 5 })}, code: sandbox.FailedPrecondition},
		{name: "short size", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Size = 3 })}, code: sandbox.FailedPrecondition},
		{name: "negative size", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Size = -1 })}, code: sandbox.InvalidArgument},
		{name: "one blob two sizes", entries: []store.Entry{file("x"), with(file("y"), func(e *store.Entry) { e.Size = 3 })}, code: sandbox.InvalidArgument},
		{name: "missing blob", entries: []store.Entry{file("a"), {Path: "b", Kind: store.EntryFile, Blob: missing, Size: 1}}, code: sandbox.NotFound},
		{name: "blob bytes do not match", entries: []store.Entry{{Path: "x", Kind: store.EntryFile, Blob: other, Size: 4}}, code: sandbox.FailedPrecondition},
		{name: "mode 0777", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Mode = 0o777 })}, code: sandbox.InvalidArgument},
		{name: "setuid", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Mode = 0o4755 })}, code: sandbox.InvalidArgument},
		{name: "unknown kind", entries: []store.Entry{{Path: "x", Kind: "fifo"}}, code: sandbox.InvalidArgument},
		{name: "dir with a blob", entries: []store.Entry{with(dir("x"), func(e *store.Entry) { e.Blob = gd })}, code: sandbox.InvalidArgument},
		{name: "file with a target", entries: []store.Entry{with(file("x"), func(e *store.Entry) { e.Target = "keep.txt" })}, code: sandbox.InvalidArgument},
		{name: "over protected .git", entries: []store.Entry{file(".git/config")}, code: sandbox.InvalidArgument},
		{name: ".git replaced by a file", entries: []store.Entry{file(".git")}, code: sandbox.InvalidArgument},
		{name: "nested .git hooks", entries: []store.Entry{file("dir/.git/hooks/pre-commit")}, code: sandbox.InvalidArgument},
		{name: "through the planted .env link", entries: []store.Entry{file(".env/secret.txt")}, code: sandbox.InvalidArgument},
		{name: ".env variant", entries: []store.Entry{file("sub/.env.production")}, code: sandbox.InvalidArgument},
		{name: "node_modules", entries: []store.Entry{file("node_modules/x.js")}, code: sandbox.InvalidArgument},
		{name: "file over a dir holding a protected path", entries: []store.Entry{file("pkg")}, code: sandbox.FailedPrecondition},
		{name: "link over a dir holding a protected path", entries: []store.Entry{link("pkg", "dir")}, code: sandbox.FailedPrecondition},
		{name: "projected AGENTS.md", entries: []store.Entry{file("AGENTS.md")}, code: sandbox.InvalidArgument, opts: checkpoint.RestoreOptions{Rules: projected()}},
		{name: "supplied exclude", entries: []store.Entry{file("keep.txt")}, code: sandbox.InvalidArgument,
			opts: checkpoint.RestoreOptions{Rules: checkpoint.Rules{Exclude: func(p string, _ store.EntryKind) bool { return p == "keep.txt" }}}},
		{name: "not included", entries: []store.Entry{file("x")}, code: sandbox.InvalidArgument,
			opts: checkpoint.RestoreOptions{Rules: checkpoint.Rules{Include: func(p string, _ store.EntryKind) bool { return p != "x" }}}},
		{name: "over MaxFiles", entries: []store.Entry{file("a"), file("b"), file("c")}, code: sandbox.ResourceExhausted,
			opts: checkpoint.RestoreOptions{Limits: checkpoint.Limits{MaxFiles: 2}}},
		{name: "over MaxFileBytes", entries: []store.Entry{file("a")}, code: sandbox.ResourceExhausted,
			opts: checkpoint.RestoreOptions{Limits: checkpoint.Limits{MaxFileBytes: 3}}},
		{name: "over MaxBytes", entries: []store.Entry{file("a"), file("b")}, code: sandbox.ResourceExhausted,
			opts: checkpoint.RestoreOptions{Limits: checkpoint.Limits{MaxBytes: 7}}},
		{name: "bad entry after good ones", entries: []store.Entry{file("aaa"), dir("new"), file("zzz/../x")}, code: sandbox.InvalidArgument},
		{name: "links without LinkFS", entries: []store.Entry{file("a"), link("l", "a")}, code: sandbox.FailedPrecondition,
			wrap: func(f sandbox.FS) sandbox.FS { return plainFS{f} }},
		{name: "executable without ModeFS", entries: []store.Entry{with(file("a"), func(e *store.Entry) { e.Mode = 0o755 })}, code: sandbox.FailedPrecondition,
			wrap: func(f sandbox.FS) sandbox.FS { return linkOnlyFS{f, f.(sandbox.LinkFS)} }},
		{name: "mode change without ModeFS", entries: []store.Entry{{Path: "bin/tool", Kind: store.EntryFile, Blob: gd, Size: 4}}, code: sandbox.FailedPrecondition,
			wrap: func(f sandbox.FS) sandbox.FS { return linkOnlyFS{f, f.(sandbox.LinkFS)} }},
	}
	ctx := context.Background()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					w := newWorld(t, kind)
					build(t, w.dir, hostileDest...)
					blobs := newBlobs()
					blobs.add(good)
					blobs.raw(other, "evil")
					before, outside := hostTree(t, w.dir), hostTree(t, w.outside)
					fsys := w.fs
					if c.wrap != nil {
						fsys = c.wrap(fsys)
					}
					_, err := checkpoint.Restore(ctx, fsys, sandbox.WorkspaceRoot, c.entries, blobs, c.opts)
					if err == nil {
						t.Fatal("restore succeeded")
					}
					if got := sandbox.CodeOf(err); got != c.code {
						t.Errorf("code %v, want %v: %v", got, c.code, err)
					}
					if d := diffMaps(before, hostTree(t, w.dir)); d != "" {
						t.Errorf("the workspace changed:\n%s", d)
					}
					if d := diffMaps(outside, hostTree(t, w.outside)); d != "" {
						t.Errorf("outside the workspace changed:\n%s", d)
					}
				})
			}
		})
	}
}

// FuzzValidateManifest feeds the validator arbitrary manifests (as JSON) and
// checks what it lets through: paths stay inside the root lexically, once
// each, never under a file or link nor in an excluded place, and link
// targets resolve inside the root.
func FuzzValidateManifest(f *testing.F) {
	gd := digestOf([]byte("good"))
	for _, s := range []string{
		`[{"path":"a","kind":"file","blob":"` + gd + `","size":4}]`,
		`[{"path":"a/b","kind":"symlink","target":"../c"}]`,
		`[{"path":"a/b","kind":"symlink","target":"../../c"}]`,
		`[{"path":"../a","kind":"dir"}]`,
		`[{"path":"a","kind":"file","blob":"` + gd + `","size":4},{"path":"a/b","kind":"dir"}]`,
		`[{"path":"x/.git/y","kind":"dir"}]`,
		`[{"path":"d","kind":"dir"},{"path":"d","kind":"dir"}]`,
		`[{"path":"l","kind":"symlink","target":"."}]`,
		`[{"path":"a\\b","kind":"dir"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []store.Entry
		if json.Unmarshal(data, &entries) != nil {
			return
		}
		if checkpoint.ValidateManifest(entries, checkpoint.Rules{}, checkpoint.Limits{}) != nil {
			return
		}
		kinds := map[string]store.EntryKind{}
		for _, e := range entries {
			if _, dup := kinds[e.Path]; dup {
				t.Fatalf("duplicate %q accepted", e.Path)
			}
			kinds[e.Path] = e.Kind
			rel, err := sandbox.CleanPath(e.Path)
			if err != nil || rel != e.Path || path.IsAbs(e.Path) || strings.ContainsAny(e.Path, "\\\x00") {
				t.Fatalf("path %q accepted (clean %q, %v)", e.Path, rel, err)
			}
			if checkpoint.DefaultExclude(e.Path, e.Kind) {
				t.Fatalf("excluded path %q accepted", e.Path)
			}
			if e.Kind == store.EntrySymlink {
				r := path.Join(path.Dir(e.Path), e.Target)
				if path.IsAbs(e.Target) || r == ".." || strings.HasPrefix(r, "../") {
					t.Fatalf("link %q -> %q leaves the root", e.Path, e.Target)
				}
			}
		}
		for p := range kinds {
			for i := 0; i < len(p); i++ {
				if p[i] == '/' {
					if k, ok := kinds[p[:i]]; ok && k != store.EntryDir {
						t.Fatalf("%q accepted under %s %q", p, k, p[:i])
					}
				}
			}
		}
	})
}
