package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/checkpoint"
	"github.com/d10ffeed/corral/store"
)

// naiveRedact is the obvious quadratic definition Redact must agree with.
func naiveRedact(data []byte, secrets []string) []byte {
	mask := make([]bool, len(data))
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for i := 0; i+len(s) <= len(data); i++ {
			if string(data[i:i+len(s)]) == s {
				for j := i; j < i+len(s); j++ {
					mask[j] = true
				}
			}
		}
	}
	out := bytes.Clone(data)
	for i, m := range mask {
		if m {
			out[i] = 0
		}
	}
	return out
}

func TestRedact(t *testing.T) {
	z := func(n int) string { return strings.Repeat("\x00", n) }
	cases := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"none", "hello", []string{"zzz"}, "hello"},
		{"empty secret ignored", "hello", []string{""}, "hello"},
		{"one", "key=abc;", []string{"abc"}, "key=" + z(3) + ";"},
		{"every occurrence", "abc abc", []string{"abc"}, z(3) + " " + z(3)},
		{"overlapping secrets", "xxabcdefyy", []string{"abcd", "cdef"}, "xx" + z(6) + "yy"},
		{"contained secret", "xabcdx", []string{"bc", "abcd"}, "x" + z(4) + "x"},
		{"self-overlapping", "aaaa", []string{"aaa"}, z(4)},
		{"periodic", "abababa!", []string{"aba"}, z(7) + "!"},
		{"across a line", "token: se\ncret\n", []string{"se\ncret"}, "token: " + z(7) + "\n"},
		{"longer than data", "ab", []string{"abc"}, "ab"},
		{"adjacent", "abcdef", []string{"abc", "def"}, z(6)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := []byte(c.in)
			got := checkpoint.Redact(in, c.secrets)
			if string(got) != c.want {
				t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.want)
			}
			if len(got) != len(in) {
				t.Errorf("length %d, want %d", len(got), len(in))
			}
			if string(in) != c.in {
				t.Errorf("the input was changed to %q", in)
			}
			if n := naiveRedact(in, c.secrets); !bytes.Equal(n, got) {
				t.Errorf("naive %q, Redact %q", n, got)
			}
		})
	}
}

func FuzzRedact(f *testing.F) {
	f.Add([]byte("xxabcdefyy"), "abcd", "cdef")
	f.Add([]byte("aaaaaaa"), "aa", "aaa")
	f.Add([]byte("ab\nab\n"), "b\na", "")
	f.Fuzz(func(t *testing.T, data []byte, s1, s2 string) {
		secrets := []string{s1, s2}
		got := checkpoint.Redact(data, secrets)
		if want := naiveRedact(data, secrets); !bytes.Equal(got, want) {
			t.Fatalf("Redact(%q, %q) = %q, want %q", data, secrets, got, want)
		}
	})
}

// TestCaptureRedacts proves that a captured file's blob, digest and size
// are those of the redacted bytes, and that paths and link targets holding
// a secret are skipped.
func TestCaptureRedacts(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t, kind)
			build(t, w.dir,
				"config.txt=user=alice\npass=hunter2-xyz\nkey=tok\nen\n",
				"clean.txt=nothing here",
				"dir-hunter2-xyz/f=x",
				"l -> hunter2-xyz",
			)
			secrets := []string{"hunter2", "2-xyz", "tok\nen"}
			blobs := newBlobs()
			res, err := checkpoint.Capture(ctx, w.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{Secrets: secrets}, blobs)
			if err != nil {
				t.Fatal(err)
			}
			want := "user=alice\npass=\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\nkey=\x00\x00\x00\x00\x00\x00\n"
			var cfg *store.Entry
			for i := range res.Entries {
				if res.Entries[i].Path == "config.txt" {
					cfg = &res.Entries[i]
				}
			}
			if cfg == nil {
				t.Fatalf("config.txt not captured: %v", short(res.Entries))
			}
			if cfg.Size != int64(len(want)) || cfg.Blob != digestOf([]byte(want)) {
				t.Errorf("config.txt: size %d blob %s, want %d %s", cfg.Size, cfg.Blob, len(want), digestOf([]byte(want)))
			}
			rc, err := blobs.OpenBlob(ctx, cfg.Blob)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			if string(b) != want {
				t.Errorf("blob %q, want %q", b, want)
			}
			for d, data := range blobs.m {
				for _, s := range secrets {
					if bytes.Contains(data, []byte(s)) {
						t.Errorf("blob %s holds the secret %q", d, s)
					}
				}
			}
			if diff := diffSlices([]string{"clean.txt file 12", "config.txt file 39"}, short(res.Entries)); diff != "" {
				t.Errorf("entries:\n%s", diff)
			}
			var skipped []string
			for _, s := range res.Skipped {
				skipped = append(skipped, s.Path+": "+s.Reason)
			}
			if diff := diffSlices([]string{
				"dir-hunter2-xyz: " + checkpoint.ReasonSecretInPath,
				"l: " + checkpoint.ReasonSecretInPath,
			}, skipped); diff != "" {
				t.Errorf("skipped:\n%s", diff)
			}
		})
	}
}

func TestCaptureBounds(t *testing.T) {
	ctx := context.Background()
	tree := []string{"a=12345", "b=12345", "c/d=12345", "e/"}
	cases := []struct {
		name string
		opts checkpoint.CaptureOptions
		cap  string // named in the error; "" means the capture succeeds
		path string
	}{
		{"fits", checkpoint.CaptureOptions{MaxFiles: 4, MaxBytes: 15, MaxFileBytes: 5}, "", ""},
		{"files", checkpoint.CaptureOptions{MaxFiles: 3}, "MaxFiles", "e"},
		{"bytes", checkpoint.CaptureOptions{MaxBytes: 14}, "MaxBytes", "c/d"},
		{"file bytes", checkpoint.CaptureOptions{MaxFileBytes: 4}, "MaxFileBytes", "a"},
	}
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t, kind)
			build(t, w.dir, tree...)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					_, err := checkpoint.Capture(ctx, w.fs, sandbox.WorkspaceRoot, c.opts, newBlobs())
					if c.cap == "" {
						if err != nil {
							t.Fatal(err)
						}
						return
					}
					var se *sandbox.Error
					if sandbox.CodeOf(err) != sandbox.ResourceExhausted || !errors.As(err, &se) {
						t.Fatalf("error %v, want ResourceExhausted", err)
					}
					if se.ID != c.path || !strings.Contains(err.Error(), c.cap) {
						t.Errorf("error %q (id %q), want it to name %s and %q", err, se.ID, c.cap, c.path)
					}
				})
			}
		})
	}
}

// TestBlobDedup: identical files are one blob, put once; a second capture
// of the same tree puts nothing.
func TestBlobDedup(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "local")
	build(t, w.dir, "a=same", "b/c=same", "d=other")
	blobs := newBlobs()
	res, err := checkpoint.Capture(ctx, w.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{}, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if blobs.puts != 2 || res.BlobsPut != 2 || blobs.has != 2 {
		t.Errorf("puts %d (reported %d), has %d; want 2, 2, 2", blobs.puts, res.BlobsPut, blobs.has)
	}
	res, err = checkpoint.Capture(ctx, w.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{}, blobs)
	if err != nil {
		t.Fatal(err)
	}
	if blobs.puts != 2 || res.BlobsPut != 0 {
		t.Errorf("second capture: puts %d, reported %d", blobs.puts, res.BlobsPut)
	}
}

// unimplementedFS is an FS whose Lstat is not implemented.
type unimplementedFS struct{ sandbox.FS }

func (unimplementedFS) Lstat(context.Context, string) (sandbox.FileInfo, error) {
	return sandbox.FileInfo{}, sandbox.Unsupported("test", "lstat")
}

func TestCaptureWithoutOptionalMethods(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "local")
	build(t, w.dir, "a=1", "l -> a")
	res, err := checkpoint.Capture(ctx, plainFS{w.fs}, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{}, newBlobs())
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffSlices([]string{"a file 1"}, short(res.Entries)); diff != "" {
		t.Error(diff)
	}
	if len(res.Skipped) != 1 || res.Skipped[0].Reason != checkpoint.ReasonLinkUnreadable {
		t.Errorf("skipped %+v", res.Skipped)
	}
	_, err = checkpoint.Capture(ctx, unimplementedFS{w.fs}, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{}, newBlobs())
	if sandbox.CodeOf(err) != sandbox.Unimplemented || !strings.Contains(err.Error(), "Lstat") {
		t.Errorf("error %v, want Unimplemented naming Lstat", err)
	}
	_, err = checkpoint.Capture(ctx, w.fs, "/workspace/a", checkpoint.CaptureOptions{}, newBlobs())
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("a file as root: %v", err)
	}
}

// TestRules: a supplied Exclude replaces the default; Include keeps it.
func TestRules(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "local")
	build(t, w.dir, "a.go=1", "b.txt=2", ".env=3", "node_modules/m=4", "tmp/x.go=5", "AGENTS.md=6")
	cases := []struct {
		name  string
		rules checkpoint.Rules
		want  []string
	}{
		{"default", checkpoint.Rules{}, []string{"AGENTS.md file 1", "a.go file 1", "b.txt file 1", "tmp/x.go file 1"}},
		{"projected", projected(), []string{"a.go file 1", "b.txt file 1", "tmp/x.go file 1"}},
		{"exclude replaces", checkpoint.Rules{Exclude: func(p string, _ store.EntryKind) bool { return p == "tmp" }},
			[]string{".env file 1", "AGENTS.md file 1", "a.go file 1", "b.txt file 1", "node_modules/m file 1"}},
		{"include keeps the default", checkpoint.Rules{Include: func(p string, k store.EntryKind) bool {
			return k != store.EntryFile || strings.HasSuffix(p, ".go") || strings.HasPrefix(p, ".env")
		}}, []string{"a.go file 1", "tmp/x.go file 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := checkpoint.Capture(ctx, w.fs, sandbox.WorkspaceRoot, checkpoint.CaptureOptions{Rules: c.rules}, newBlobs())
			if err != nil {
				t.Fatal(err)
			}
			if diff := diffSlices(c.want, short(res.Entries)); diff != "" {
				t.Error(diff)
			}
		})
	}
}
