package sandboxtest

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func (s *suite) testCapabilities(t *testing.T) {
	ctx := s.ctx(t)
	p := s.h.Provider
	if !s.caps.FS || !s.caps.Exec {
		t.Errorf("fs and exec are mandatory; got %v", s.caps)
	}
	h := s.create(t, ctx)
	if h.Capabilities() != s.caps {
		t.Errorf("handle capabilities %v differ from provider capabilities %v", h.Capabilities(), s.caps)
	}
	if h.Provider() != p.Name() {
		t.Errorf("handle provider %q, want %q", h.Provider(), p.Name())
	}
	if h.ID() == "" {
		t.Error("handle id is empty")
	}
	if h.WorkspaceRoot() == "" {
		t.Error("workspace root is empty")
	}
	if !s.caps.Snapshots {
		_, err := h.Snapshot(ctx, "x")
		if !isUnimplemented(err) {
			t.Errorf("Snapshot without the snapshots flag: got %v, want Unimplemented", err)
		}
		_, err = p.RestoreSnapshot(ctx, "x", sandbox.CreateOptions{})
		if !isUnimplemented(err) {
			t.Errorf("RestoreSnapshot without the snapshots flag: got %v, want Unimplemented", err)
		}
		if err := p.DeleteSnapshot(ctx, "x"); !isUnimplemented(err) {
			t.Errorf("DeleteSnapshot without the snapshots flag: got %v, want Unimplemented", err)
		}
	}
	if !s.caps.Fork {
		if _, err := h.Fork(ctx); !isUnimplemented(err) {
			t.Errorf("Fork without the fork flag: got %v, want Unimplemented", err)
		}
	}
	if !s.caps.Ports {
		if _, err := h.ConnectPort(ctx, 8080); !isUnimplemented(err) {
			t.Errorf("ConnectPort without the ports flag: got %v, want Unimplemented", err)
		}
	}
	if !s.caps.Env {
		if err := h.SetEnv(ctx, map[string]string{"A": "1"}); !isUnimplemented(err) {
			t.Errorf("SetEnv without the env flag: got %v, want Unimplemented", err)
		}
	}
	if !s.caps.WritableStdin {
		pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"cat"}})
		if err != nil {
			t.Fatalf("Spawn: %v", err)
		}
		_, werr := pr.Stdin().Write([]byte("x"))
		if !isUnimplemented(werr) {
			t.Errorf("stdin write without the writableStdin flag: got %v, want Unimplemented", werr)
		}
		_ = pr.Kill(ctx, 0)
	}
	_, err := h.Exec(ctx, sandbox.Command{})
	wantCode(t, "Exec of an empty command", err, sandbox.InvalidArgument)
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}, Shell: "true"})
	wantCode(t, "Exec with both Args and Shell", err, sandbox.InvalidArgument)
}

func (s *suite) testFileRoundTrips(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	fs := h.FS()

	text := []byte("hello, corral\nsecond line: ünïcødé ✓\n")
	writeFile(t, ctx, h, "hello.txt", text)
	mustEqualBytes(t, "text", readFile(t, ctx, h, "hello.txt"), text)
	mustEqualBytes(t, "absolute form", readFile(t, ctx, h, "/workspace/hello.txt"), text)

	bin := make([]byte, 512)
	for i := range bin {
		bin[i] = byte(i)
	}
	writeFile(t, ctx, h, "/workspace/bin.dat", bin)
	mustEqualBytes(t, "binary", readFile(t, ctx, h, "bin.dat"), bin)

	big := make([]byte, 1<<20)
	_, _ = rand.Read(big)
	writeFile(t, ctx, h, "big.bin", big)
	mustEqualBytes(t, "1 MiB", readFile(t, ctx, h, "big.bin"), big)

	writeFile(t, ctx, h, "a/b/c/deep.txt", []byte("deep"))
	mustEqualBytes(t, "nested", readFile(t, ctx, h, "a/b/c/deep.txt"), []byte("deep"))

	writeFile(t, ctx, h, "hello.txt", []byte("short"))
	mustEqualBytes(t, "overwrite truncates", readFile(t, ctx, h, "hello.txt"), []byte("short"))

	writeFile(t, ctx, h, "empty", nil)
	mustEqualBytes(t, "empty file", readFile(t, ctx, h, "empty"), nil)

	odd := "sp ace 'quote' $dollar -dash"
	writeFile(t, ctx, h, odd, []byte("odd"))
	mustEqualBytes(t, "odd name", readFile(t, ctx, h, odd), []byte("odd"))

	// The file system and commands see the same workspace.
	if got := sh(t, ctx, h, "cat a/b/c/deep.txt"); got != "deep" {
		t.Errorf("exec sees %q in a file written through FS, want %q", got, "deep")
	}
	sh(t, ctx, h, "printf 'from exec' > from-exec.txt")
	mustEqualBytes(t, "file written by exec", readFile(t, ctx, h, "from-exec.txt"), []byte("from exec"))

	fi, err := fs.Stat(ctx, "big.bin")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if fi.Type != sandbox.TypeFile || fi.Size != 1<<20 || fi.Path != "/workspace/big.bin" || fi.Name != "big.bin" {
		t.Errorf("Stat big.bin = %+v", fi)
	}
	_, err = fs.ReadFile(ctx, "missing.txt")
	wantCode(t, "ReadFile of a missing file", err, sandbox.NotFound)
	_, err = fs.Stat(ctx, "missing.txt")
	wantCode(t, "Stat of a missing file", err, sandbox.NotFound)
	_, err = fs.ReadFile(ctx, "")
	wantCode(t, "ReadFile of an empty path", err, sandbox.InvalidArgument)
}

func (s *suite) testFileListing(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	fs := h.FS()
	writeFile(t, ctx, h, "dir/file.txt", []byte("f"))
	if err := fs.MkdirAll(ctx, "dir/sub/inner"); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := fs.MkdirAll(ctx, "dir/sub"); err != nil {
		t.Fatalf("MkdirAll of an existing dir: %v", err)
	}
	sh(t, ctx, h, "ln -s file.txt dir/link")

	ents, err := fs.ReadDir(ctx, "/workspace/dir")
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	want := []sandbox.DirEntry{
		{Name: "file.txt", Path: "/workspace/dir/file.txt", Type: sandbox.TypeFile},
		{Name: "link", Path: "/workspace/dir/link", Type: sandbox.TypeSymlink},
		{Name: "sub", Path: "/workspace/dir/sub", Type: sandbox.TypeDir},
	}
	if len(ents) != len(want) {
		t.Fatalf("ReadDir = %+v, want %+v", ents, want)
	}
	for i := range want {
		if ents[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, ents[i], want[i])
		}
	}

	li, err := fs.Lstat(ctx, "dir/link")
	if err != nil {
		t.Fatalf("Lstat of a link: %v", err)
	}
	if li.Type != sandbox.TypeSymlink || li.Mode&0o170000 == 0 && li.Mode.Type() == 0 {
		t.Errorf("Lstat of a link = %+v, want type symlink with type bits in the mode", li)
	}
	si, err := fs.Stat(ctx, "dir/link")
	if err != nil || si.Type != sandbox.TypeFile {
		t.Errorf("Stat of a link to a file = %+v, %v; want type file", si, err)
	}
	di, err := fs.Lstat(ctx, "dir/sub")
	if err != nil || di.Type != sandbox.TypeDir || !di.Mode.IsDir() {
		t.Errorf("Lstat of a dir = %+v, %v", di, err)
	}
	_, err = fs.Lstat(ctx, "dir/nope")
	wantCode(t, "Lstat of a missing path", err, sandbox.NotFound)

	root, err := fs.ReadDir(ctx, ".")
	if err != nil || len(root) != 1 || root[0].Path != "/workspace/dir" {
		t.Errorf("ReadDir of the root = %+v, %v", root, err)
	}
	_, err = fs.ReadDir(ctx, "nope")
	wantCode(t, "ReadDir of a missing dir", err, sandbox.NotFound)
}

func (s *suite) testFileMutations(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	fs := h.FS()
	writeFile(t, ctx, h, "old.txt", []byte("content"))
	if err := fs.Rename(ctx, "old.txt", "moved/new.txt"); err != nil {
		// Rename does not promise to create parents; retry into an
		// existing directory.
		if err := fs.MkdirAll(ctx, "moved"); err != nil {
			t.Fatal(err)
		}
		if err := fs.Rename(ctx, "old.txt", "moved/new.txt"); err != nil {
			t.Fatalf("Rename: %v", err)
		}
	}
	mustEqualBytes(t, "renamed file", readFile(t, ctx, h, "moved/new.txt"), []byte("content"))
	if ok, err := fs.Exists(ctx, "old.txt"); err != nil || ok {
		t.Errorf("Exists(old.txt) after rename = %v, %v", ok, err)
	}
	if ok, err := fs.Exists(ctx, "moved/new.txt"); err != nil || !ok {
		t.Errorf("Exists(moved/new.txt) = %v, %v", ok, err)
	}
	writeFile(t, ctx, h, "other.txt", []byte("other"))
	if err := fs.Rename(ctx, "other.txt", "moved/new.txt"); err != nil {
		t.Fatalf("Rename onto an existing file: %v", err)
	}
	mustEqualBytes(t, "replaced file", readFile(t, ctx, h, "moved/new.txt"), []byte("other"))

	if err := fs.RemoveAll(ctx, "does/not/exist"); err != nil {
		t.Errorf("RemoveAll of a missing path: %v", err)
	}
	writeFile(t, ctx, h, "tree/a/b/c.txt", []byte("c"))
	if err := fs.RemoveAll(ctx, "tree"); err != nil {
		t.Fatalf("RemoveAll of a tree: %v", err)
	}
	if ok, _ := fs.Exists(ctx, "tree"); ok {
		t.Error("tree still exists after RemoveAll")
	}
	if err := fs.RemoveAll(ctx, "/workspace"); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("RemoveAll of the root: got %v, want InvalidArgument", err)
	}
	if ok, err := fs.Exists(ctx, "."); err != nil || !ok {
		t.Errorf("the root must survive: Exists = %v, %v", ok, err)
	}
}

// testPathEscapes proves that no path leaves the workspace: lexically, or
// through symbolic links of every shape, and that nothing outside the root
// is read or written.
func (s *suite) testPathEscapes(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	fs := h.FS()
	outside := strings.TrimSpace(sh(t, ctx, h, `d=$(mktemp -d) && printf secret > "$d/secret" && printf '%s' "$d"`))
	t.Cleanup(func() { _, _ = h.Exec(ctx, sandbox.Command{Args: []string{"rm", "-rf", outside}}) })
	root := h.WorkspaceRoot()
	depth := strings.Count(strings.Trim(root, "/"), "/") + 1
	up := strings.Repeat("../", depth+2)
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `
		mkdir -p sub && printf inside > sub/ok.txt &&
		ln -s "$1" out && ln -s "$1/secret" pw && ln -s chain2 chain1 && ln -s "$1" chain2 &&
		ln -s "$2${1#/}" rel && ln -s sub inlink && ln -s ../../.. sub/up`, "sh", outside, up}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("making links: %v %+v", err, res)
	}
	escape := []sandbox.Code{sandbox.InvalidArgument, sandbox.PermissionDenied}
	rejected := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s succeeded; it must be rejected", what)
			return
		}
		wantCode(t, what, err, escape...)
	}

	lexical := []string{"../x", "a/../../x", "/etc/passwd", "/workspace/../etc/passwd", "/workspacefoo/x", "..", outside + "/secret"}
	for _, p := range lexical {
		_, err := fs.ReadFile(ctx, p)
		rejected("ReadFile("+p+")", err)
		rejected("WriteFile("+p+")", fs.WriteFile(ctx, p, []byte("pwned")))
		_, err = fs.ReadDir(ctx, p)
		rejected("ReadDir("+p+")", err)
		rejected("MkdirAll("+p+")", fs.MkdirAll(ctx, p))
		rejected("RemoveAll("+p+")", fs.RemoveAll(ctx, p))
		_, err = fs.Stat(ctx, p)
		rejected("Stat("+p+")", err)
		_, err = fs.Lstat(ctx, p)
		rejected("Lstat("+p+")", err)
		_, err = fs.Exists(ctx, p)
		rejected("Exists("+p+")", err)
		rejected("Rename(sub/ok.txt, "+p+")", fs.Rename(ctx, "sub/ok.txt", p))
	}
	// A file link, a directory link, a chain of links and a relative link,
	// each leading outside.
	for _, p := range []string{"pw", "out", "out/secret", "chain1", "chain1/secret", "rel", "rel/secret", "sub/up/etc/passwd"} {
		_, err := fs.ReadFile(ctx, p)
		rejected("ReadFile("+p+")", err)
	}
	for _, p := range []string{"pw", "out/new.txt", "chain1/new.txt", "rel/new.txt", "sub/up/tmp/new.txt"} {
		rejected("WriteFile("+p+")", fs.WriteFile(ctx, p, []byte("pwned")))
	}
	for _, p := range []string{"out", "chain1", "rel", "sub/up"} {
		_, err := fs.ReadDir(ctx, p)
		rejected("ReadDir("+p+")", err)
		rejected("MkdirAll("+p+"/made)", fs.MkdirAll(ctx, p+"/made"))
		_, err = fs.Stat(ctx, p+"/secret")
		rejected("Stat("+p+"/secret)", err)
		_, err = fs.Exists(ctx, p+"/secret")
		rejected("Exists("+p+"/secret)", err)
		rejected("RemoveAll("+p+"/secret)", fs.RemoveAll(ctx, p+"/secret"))
	}
	rejected("Rename into a link to outside", fs.Rename(ctx, "sub/ok.txt", "out/stolen.txt"))
	rejected("Rename out of a link to outside", fs.Rename(ctx, "out/secret", "stolen.txt"))
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "../"})
	rejected("Exec with Dir outside the workspace", err)
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "out"})
	rejected("Exec with Dir through a link to outside", err)

	// Links that stay inside work, and links themselves can be inspected
	// and removed without touching their targets.
	mustEqualBytes(t, "read through an inside link", readFile(t, ctx, h, "inlink/ok.txt"), []byte("inside"))
	writeFile(t, ctx, h, "inlink/new.txt", []byte("new"))
	mustEqualBytes(t, "write through an inside link", readFile(t, ctx, h, "sub/new.txt"), []byte("new"))
	if fi, err := fs.Lstat(ctx, "out"); err != nil || fi.Type != sandbox.TypeSymlink {
		t.Errorf("Lstat(out) = %+v, %v; want a symlink (Lstat never follows)", fi, err)
	}
	if err := fs.RemoveAll(ctx, "pw"); err != nil {
		t.Errorf("RemoveAll of a link to outside (the link itself): %v", err)
	}

	// Nothing outside the root was touched.
	res, err = h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `cd "$1" && ls -A && cat secret`, "sh", outside}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("inspecting outside dir: %v %+v", err, res)
	}
	if string(res.Stdout) != "secret\nsecret" {
		t.Errorf("the directory outside the workspace changed: ls+cat = %q, want %q", res.Stdout, "secret\nsecret")
	}
	res, err = h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `test ! -e "$1/tmp/new.txt" || test "$(cat "$1/tmp/new.txt")" != pwned`, "sh", "/"}})
	if err != nil || res.ExitCode != 0 {
		t.Errorf("a file was written at /tmp/new.txt through sub/up: %v %+v", err, res)
	}
}
