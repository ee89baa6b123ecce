package checkpoint_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/checkpoint"
	"github.com/d10ffeed/corral/store"
)

// sourceTree is the workspace of the round-trip tests.
var sourceTree = []string{
	"a.txt=hello",
	"src/main.go=package main\n",
	"src/pkg/deep/x.go=package deep\n",
	"empty/",
	"nested/empty2/",
	"bin/run.sh*=#!/bin/sh\necho hi\n",
	"link -> src/main.go",
	"src/up -> ../a.txt",
	"src/dirlink -> pkg",
	"src/pkg/deep/root -> ../../..",
	"dotlink -> ./a.txt",
	"escape -> ../outside",
	"deepescape -> src/../../outside",
	"abs -> /etc/passwd",
	"fifo|",
	".git/config=[core]",
	"node_modules/x/index.js=x",
	".env=SECRET=1",
	".env.local=x",
	"sub/.envrc=x",
	"sub/ok.txt=ok",
	"AGENTS.md=agents",
	"CLAUDE.md -> AGENTS.md",
	"GEMINI.md=gem",
	"only-git/.git/HEAD=ref",
	"copy1.txt=same",
	"copy2.txt=same",
}

// wantEntries is what a capture of sourceTree lists, in a short form.
var wantEntries = []string{
	"a.txt file 5",
	"bin/run.sh file 18 755",
	"copy1.txt file 4",
	"copy2.txt file 4",
	"dotlink symlink a.txt",
	"empty dir",
	"link symlink src/main.go",
	"nested/empty2 dir",
	"only-git dir",
	"src/dirlink symlink pkg",
	"src/main.go file 13",
	"src/pkg/deep/root symlink ../../..",
	"src/pkg/deep/x.go file 13",
	"src/up symlink ../a.txt",
	"sub/ok.txt file 2",
}

func short(es []store.Entry) []string {
	var out []string
	for _, e := range es {
		s := e.Path + " " + string(e.Kind)
		switch e.Kind {
		case store.EntryFile:
			s += fmt.Sprintf(" %d", e.Size)
			if e.Mode != 0 {
				s += fmt.Sprintf(" %o", e.Mode)
			}
		case store.EntrySymlink:
			s += " " + e.Target
		}
		out = append(out, s)
	}
	return out
}

func projected() checkpoint.Rules {
	return checkpoint.Rules{Projected: checkpoint.ProjectedFiles(&sandbox.Workspace{Instructions: "Be brief."})}
}

// expectedTree is src's host tree cut to the captured entries and their
// parent directories (a link as captured: "./a.txt" is kept as "a.txt").
func expectedTree(src map[string]string, entries []store.Entry) map[string]string {
	out := map[string]string{}
	for _, e := range entries {
		defer func() {
			if e.Kind == store.EntrySymlink {
				out[filepath.FromSlash(e.Path)] = "l " + e.Target
			}
		}()
		p := e.Path
		for {
			out[filepath.FromSlash(p)] = src[filepath.FromSlash(p)]
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				break
			}
			p = p[:i]
		}
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, from := range kinds {
		for _, to := range kinds {
			t.Run(from+"-to-"+to, func(t *testing.T) {
				src := newWorld(t, from)
				build(t, src.dir, sourceTree...)
				if _, ok := src.fs.(sandbox.LinkFS); !ok {
					t.Fatalf("the %s FS hides sandbox.LinkFS", from)
				}
				if _, ok := src.fs.(sandbox.ModeFS); !ok {
					t.Fatalf("the %s FS hides sandbox.ModeFS", from)
				}
				blobs := newBlobs()
				res, err := checkpoint.Capture(ctx, src.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{Rules: projected()}, blobs)
				if err != nil {
					t.Fatal(err)
				}
				if diff := diffSlices(wantEntries, short(res.Entries)); diff != "" {
					t.Fatalf("entries (-want +got):\n%s", diff)
				}
				var skipped []string
				for _, s := range res.Skipped {
					skipped = append(skipped, s.Path+": "+s.Reason)
				}
				wantSkipped := []string{
					"abs: " + checkpoint.ReasonLinkEscapes,
					"deepescape: " + checkpoint.ReasonLinkEscapes,
					"escape: " + checkpoint.ReasonLinkEscapes,
					"fifo: " + checkpoint.ReasonSpecial,
				}
				if diff := diffSlices(wantSkipped, skipped); diff != "" {
					t.Errorf("skipped (-want +got):\n%s", diff)
				}
				if res.Files != 7 || res.Dirs != 3 || res.Symlinks != 5 || res.Bytes != 5+18+4+4+13+13+2 {
					t.Errorf("totals: %+v", res)
				}
				if res.BlobsPut != 6 || blobs.puts != 6 {
					t.Errorf("blobs put %d (store %d), want 6: copy1 and copy2 share one", res.BlobsPut, blobs.puts)
				}

				dst := newWorld(t, to)
				rr, err := checkpoint.Restore(ctx, dst.fs, sandbox.WorkspaceRoot, res.Entries, blobs, checkpoint.RestoreOptions{Rules: projected()})
				if err != nil {
					t.Fatal(err)
				}
				if rr.Files != 7 || rr.Symlinks != 5 || rr.Removed != 0 {
					t.Errorf("restore: %+v", rr)
				}
				want := expectedTree(hostTree(t, src.dir), res.Entries)
				if diff := diffMaps(want, hostTree(t, dst.dir)); diff != "" {
					t.Errorf("restored tree (-want +got):\n%s", diff)
				}

				// A second capture of the restored tree lists the same entries
				// and puts no blob.
				again, err := checkpoint.Capture(ctx, dst.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{Rules: projected()}, blobs)
				if err != nil {
					t.Fatal(err)
				}
				if diff := diffSlices(entryStrings(res.Entries), entryStrings(again.Entries)); diff != "" {
					t.Errorf("recapture (-first +second):\n%s", diff)
				}
				if again.BlobsPut != 0 {
					t.Errorf("recapture put %d blobs", again.BlobsPut)
				}
			})
		}
	}
}

// TestRestoreOverExisting restores over a workspace that has drifted: extra
// files, changed bytes and modes, a file where a directory belongs, a link
// planted where a directory belongs, and protected paths (.git,
// node_modules, .env, a nested node_modules in a directory the checkpoint
// lacks). The result is the checkpoint plus the protected paths, untouched;
// nothing outside the workspace changes.
func TestRestoreOverExisting(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			src := newWorld(t, kind)
			build(t, src.dir, sourceTree...)
			blobs := newBlobs()
			res, err := checkpoint.Capture(ctx, src.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{Rules: projected()}, blobs)
			if err != nil {
				t.Fatal(err)
			}
			dst := newWorld(t, kind)
			build(t, dst.dir,
				"a.txt*=changed and executable",
				"bin/run.sh=not executable",
				"extra.txt=extra",
				"extra/dir/file=x",
				"empty=a file where a directory belongs",
				"nested -> ../outside", // a planted link where a directory belongs
				"src/main.go -> ../../outside/secret.txt",
				"src/up -> main.go", // a link with another target
				"link -> src/main.go",
				".git/HEAD=mine",
				"node_modules/dep/index.js=dep",
				".env=KEEP=1",
				"gone/node_modules/keep.js=keep", // gone holds a protected path
				"gone/file.txt=removed",
				"AGENTS.md=projected by this sandbox's bootstrap",
			)
			outsideBefore := hostTree(t, dst.outside)
			if _, err := checkpoint.Restore(ctx, dst.fs, sandbox.WorkspaceRoot, res.Entries, blobs, checkpoint.RestoreOptions{Rules: projected()}); err != nil {
				t.Fatal(err)
			}
			want := expectedTree(hostTree(t, src.dir), res.Entries)
			maps.Copy(want, map[string]string{
				".git": "d", ".git/HEAD": fileDesc(0o644, "mine"),
				"node_modules": "d", "node_modules/dep": "d", "node_modules/dep/index.js": fileDesc(0o644, "dep"),
				".env":              fileDesc(0o644, "KEEP=1"),
				"gone":              "d",
				"gone/node_modules": "d", "gone/node_modules/keep.js": fileDesc(0o644, "keep"),
				"AGENTS.md": fileDesc(0o644, "projected by this sandbox's bootstrap"),
			})
			if diff := diffMaps(want, hostTree(t, dst.dir)); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
			if diff := diffMaps(outsideBefore, hostTree(t, dst.outside)); diff != "" {
				t.Errorf("outside the workspace changed (-before +after):\n%s", diff)
			}
		})
	}
}

func fileDesc(mode os.FileMode, content string) string {
	return fmt.Sprintf("f %o %s", mode, digestOf([]byte(content)))
}

func entryStrings(es []store.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%+v", e))
	}
	return out
}

// TestRestoreProtectsNotIncluded: with an Include rule, the destination's
// paths it rejects are left alone, and a file root is refused.
func TestRestoreProtectsNotIncluded(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "local")
	build(t, w.dir, "keep.log=log", "old.go=old", "logs/", "sub/x.log=x")
	blobs := newBlobs()
	d := blobs.add("new")
	rules := checkpoint.Rules{Include: func(p string, k store.EntryKind) bool {
		return !strings.HasSuffix(p, ".log") && p != "logs"
	}}
	entries := []store.Entry{{Path: "new.go", Kind: store.EntryFile, Blob: d, Size: 3}}
	rr, err := checkpoint.Restore(ctx, w.fs, sandbox.WorkspaceRoot, entries, blobs, checkpoint.RestoreOptions{Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"keep.log": fileDesc(0o644, "log"), "logs": "d", "sub": "d", "sub/x.log": fileDesc(0o644, "x"),
		"new.go": fileDesc(0o644, "new"),
	}
	if diff := diffMaps(want, hostTree(t, w.dir)); diff != "" {
		t.Errorf("tree:\n%s", diff)
	}
	if rr.Removed != 1 || rr.Files != 1 {
		t.Errorf("result %+v, want old.go removed and new.go written", rr)
	}
	_, err = checkpoint.Restore(ctx, w.fs, "/workspace/new.go", entries, blobs, checkpoint.RestoreOptions{})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("a file as root: %v", err)
	}
}
