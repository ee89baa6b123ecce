package checkpoint_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/store"
)

// memBlobs is a tiny BlobStore: a map of digests to bytes that counts its
// calls. raw plants bytes under any key, for corrupt-store tests.
type memBlobs struct {
	mu   sync.Mutex
	m    map[string][]byte
	puts int
	has  int
}

func newBlobs() *memBlobs { return &memBlobs{m: map[string][]byte{}} }

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (b *memBlobs) PutBlob(_ context.Context, digest string, r io.Reader, size int64) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if int64(len(data)) != size || digestOf(data) != digest {
		return &sandbox.Error{Code: sandbox.InvalidArgument, Op: "put", ID: digest, Err: store.ErrBlobDigest}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.puts++
	b.m[digest] = data
	return nil
}

func (b *memBlobs) HasBlob(_ context.Context, digest string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.has++
	_, ok := b.m[digest]
	return ok, nil
}

func (b *memBlobs) OpenBlob(_ context.Context, digest string) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.m[digest]
	if !ok {
		return nil, sandbox.Errorf(sandbox.NotFound, "open", digest, "no such blob")
	}
	return io.NopCloser(bytes.NewReader(d)), nil
}

func (b *memBlobs) DeleteBlob(_ context.Context, digest string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, digest)
	return nil
}

func (b *memBlobs) ListBlobs(context.Context, string, int) ([]string, string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for k := range b.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out, "", nil
}

// add stores data and returns its digest.
func (b *memBlobs) add(data string) string {
	d := digestOf([]byte(data))
	b.mu.Lock()
	b.m[d] = []byte(data)
	b.mu.Unlock()
	return d
}

// raw plants data under key, whatever its digest.
func (b *memBlobs) raw(key, data string) {
	b.mu.Lock()
	b.m[key] = []byte(data)
	b.mu.Unlock()
}

// world is one test file system: an FS whose workspace root is dir on the
// host, and a directory outside it.
type world struct {
	fs      sandbox.FS
	dir     string // host path of the workspace
	outside string // host path of a directory next to it
}

// kinds names the file systems every test runs on.
var kinds = []string{"local", "execfs"}

// newWorld returns a fresh empty workspace on the kind of FS named. The
// local one comes through sandbox.Guard, which must hand the provider's
// FS (and its optional interfaces) through.
func newWorld(t *testing.T, kind string) *world {
	t.Helper()
	ctx := context.Background()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	if err := os.Mkdir(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "local":
		if err := os.MkdirAll(filepath.Join(base, "sb"), 0o755); err != nil {
			t.Fatal(err)
		}
		p, err := local.New(local.Options{BaseDir: filepath.Join(base, "sb")})
		if err != nil {
			t.Fatal(err)
		}
		g := sandbox.Guard(p, sandbox.GuardOptions{})
		h, err := g.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Destroy(context.Background(), h.ID()) })
		dir := h.WorkspaceRoot()
		// Put the outside directory next to the workspace, so that "../outside"
		// from the root is a real escape.
		out2 := filepath.Join(filepath.Dir(dir), "outside")
		if err := os.Rename(outside, out2); err != nil {
			t.Fatal(err)
		}
		return &world{fs: h.FS(), dir: dir, outside: out2}
	case "execfs":
		dir := filepath.Join(base, "ws")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return &world{fs: execfs.New(hostRunner, execfs.Options{Root: dir, Provider: "test"}), dir: dir, outside: outside}
	}
	t.Fatalf("unknown kind %q", kind)
	return nil
}

// hostRunner runs execfs's commands on the host.
func hostRunner(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	argv := cmd.Argv()
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Stdin = cmd.Stdin
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	return &sandbox.ExecResult{ExitCode: c.ProcessState.ExitCode(), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
}

// hostTree describes every path under dir without following links: "d",
// "f MODE SHA", "l TARGET" or "o".
func hostTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			tg, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "l " + tg
		case fi.IsDir():
			out[rel] = "d"
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("f %o %s", fi.Mode().Perm(), digestOf(b))
		default:
			out[rel] = "o"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// build makes a tree on the host from a spec: "path/" is a directory,
// "path -> target" a link, "path|" a fifo, "path*" an executable with the
// content after "=", "path=content" a file.
func build(t *testing.T, dir string, spec ...string) {
	t.Helper()
	for _, s := range spec {
		switch {
		case strings.Contains(s, " -> "):
			name, target, _ := strings.Cut(s, " -> ")
			mkParent(t, dir, name)
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(s, "/"):
			if err := os.MkdirAll(filepath.Join(dir, s), 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(s, "|"):
			name := strings.TrimSuffix(s, "|")
			mkParent(t, dir, name)
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Fatal(err)
			}
		default:
			name, content, _ := strings.Cut(s, "=")
			mode := fs.FileMode(0o644)
			if n, ok := strings.CutSuffix(name, "*"); ok {
				name, mode = n, 0o755
			}
			mkParent(t, dir, name)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func mkParent(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
}

// diffSlices returns "" when want and got are equal, else the elements
// only in one of them and both slices.
func diffSlices(want, got []string) string {
	if slices.Equal(want, got) {
		return ""
	}
	var b strings.Builder
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "-%q\n", w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "+%q\n", g)
		}
	}
	fmt.Fprintf(&b, "want %q\ngot  %q", want, got)
	return b.String()
}

func diffMaps(want, got map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok || g != want[k] {
			fmt.Fprintf(&b, "-%s: %s\n", k, want[k])
			if ok {
				fmt.Fprintf(&b, "+%s: %s\n", k, g)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			fmt.Fprintf(&b, "+%s: %s\n", k, got[k])
		}
	}
	return b.String()
}
