package storeutil

import (
	"path"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

const okDigest = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func TestPruneSet(t *testing.T) {
	at := func(h int) time.Time { return time.Unix(int64(h)*3600, 0).UTC() }
	cps := []store.Checkpoint{{ID: "a", CreatedAt: at(1)}, {ID: "b", CreatedAt: at(2)}, {ID: "c", CreatedAt: at(3)}, {ID: "d", CreatedAt: at(4)}}
	for _, tc := range []struct {
		name      string
		head      string
		keep      int
		olderThan time.Time
		want      string
	}{
		{"no rule", "d", 0, time.Time{}, ""},
		{"keep 2", "d", 2, time.Time{}, "a,b"},
		{"keep 1, head old", "a", 1, time.Time{}, "b,c"},
		{"keep more than there are", "d", 9, time.Time{}, ""},
		{"age", "d", 0, at(3), "a,b"},
		{"age spares the head", "a", 0, at(9), "b,c,d"},
		{"both rules", "d", 3, at(3), "a,b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := strings.Join(PruneSet(cps, tc.head, tc.keep, tc.olderThan), ","); got != tc.want {
				t.Fatalf("PruneSet = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBlobCursor(t *testing.T) {
	d, err := ParseBlobCursor(OpListBlobs, BlobCursor(okDigest))
	if err != nil || d != okDigest {
		t.Fatalf("round trip: %q, %v", d, err)
	}
	for _, bad := range []string{"x", "d1.", "d1.zz", okDigest, "d1." + okDigest + "0"} {
		if _, err := ParseBlobCursor(OpListBlobs, bad); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("ParseBlobCursor(%q) = %v, want InvalidArgument", bad, err)
		}
	}
}

// FuzzEntry: whatever an entry holds, NormalizeCheckpoint either refuses it
// with InvalidArgument or accepts a clean relative path whose symlink
// target stays inside the workspace.
func FuzzEntry(f *testing.F) {
	for _, seed := range [][3]string{
		{"a/b", "file", ""}, {"../x", "file", ""}, {"l", "symlink", "../x"}, {"a/l", "symlink", ".."},
		{"a/l", "symlink", "b/../../c"}, {"d", "dir", ""}, {"C:/x", "file", ""}, {`\x`, "file", ""},
		{"a\x00", "file", ""}, {"a/./b", "dir", ""}, {"l", "symlink", "/etc"}, {"ü", "symlink", "."},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, p, kind, target string) {
		e := store.Entry{Path: p, Kind: store.EntryKind(kind), Target: target}
		if e.Kind == store.EntryFile {
			e.Blob, e.Size = okDigest, 1
		}
		cp := store.Checkpoint{ID: "c", ThreadID: "t", Reason: store.CheckpointNamed, Entries: []store.Entry{e}}
		got, err := NormalizeCheckpoint(OpAppendCheckpoint, cp, time.Unix(1, 0))
		if err != nil {
			if sandbox.CodeOf(err) != sandbox.InvalidArgument {
				t.Fatalf("refused with %v, want InvalidArgument", err)
			}
			return
		}
		q := got.Entries[0].Path
		if !utf8.ValidString(q) || path.Clean(q) != q || path.IsAbs(q) || q == "." ||
			strings.HasPrefix(q, "../") || q == ".." || strings.ContainsAny(q, "\x00") || strings.HasPrefix(q, `\`) {
			t.Fatalf("accepted the path %q", q)
		}
		if e.Kind == store.EntrySymlink {
			r := path.Join(path.Dir(q), target)
			if path.IsAbs(target) || r == ".." || strings.HasPrefix(r, "../") {
				t.Fatalf("accepted the symlink %q -> %q (resolves to %q)", q, target, r)
			}
		}
	})
}
