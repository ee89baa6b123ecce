package local_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

func newProvider(t *testing.T, opts local.Options) *local.Provider {
	t.Helper()
	if opts.BaseDir == "" {
		opts.BaseDir = t.TempDir()
	}
	p, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, sandboxtest.Harness{Provider: newProvider(t, local.Options{})})
}

func TestConformanceFixedDir(t *testing.T) {
	// A fixed directory is shared by every sandbox of the provider, so only
	// the cases that don't depend on fresh sandboxes are meaningful; the
	// whole suite still passes because each case cleans up after itself.
	dir := t.TempDir()
	p := newProvider(t, local.Options{Dir: dir})
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.ID() != dir {
		t.Errorf("id %q, want the fixed dir %q", h.ID(), dir)
	}
	if err := h.FS().WriteFile(ctx, "x.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); err != nil {
		t.Errorf("a fixed dir must be kept on destroy: %v", err)
	}
}

func TestNewRejectsMissingDir(t *testing.T) {
	_, err := local.New(local.Options{Dir: filepath.Join(t.TempDir(), "nope")})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("got %v, want InvalidArgument", err)
	}
}

func TestScrubEnv(t *testing.T) {
	t.Setenv("CORRAL_T_SCRUBBED", "leak")
	t.Setenv("CORRAL_T_KEPT", "kept")
	p := newProvider(t, local.Options{ScrubEnv: []string{"CORRAL_T_SCRUBBED"}})
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy(ctx)
	res, err := h.Exec(ctx, sandbox.Command{Shell: `printf '%s|%s|%s' "$CORRAL_T_SCRUBBED" "$CORRAL_T_KEPT" "$` + local.SandboxIDEnv + `"`})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "|kept|"+h.ID(); got != want {
		t.Errorf("env = %q, want %q", got, want)
	}
}

func TestCreateWithIDAndSource(t *testing.T) {
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "f.txt"), []byte("src"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, local.Options{})
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "key123", SourceDir: src})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Destroy(ctx)
	if filepath.Base(h.ID()) != "key123" {
		t.Errorf("id %q does not end in the requested id", h.ID())
	}
	if b, err := h.FS().ReadFile(ctx, "a/f.txt"); err != nil || string(b) != "src" {
		t.Errorf("source copy: %q %v", b, err)
	}
	_, err = p.Create(ctx, sandbox.CreateOptions{ID: "key123"})
	if sandbox.CodeOf(err) != sandbox.AlreadyExists {
		t.Errorf("second create with the same id: %v, want AlreadyExists", err)
	}
	for _, bad := range []string{"../x", "a/b", ".."} {
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: bad}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("Create(ID %q): %v, want InvalidArgument", bad, err)
		}
	}
}

// TestDestroyKillsProcessesOfAnotherProvider shows that Destroy finds
// processes started by a different provider value (standing in for an
// earlier corral process) through the sandbox marker in their environment.
func TestDestroyKillsProcessesOfAnotherProvider(t *testing.T) {
	base := t.TempDir()
	ctx := context.Background()
	first := newProvider(t, local.Options{BaseDir: base})
	h, err := first.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: "(sleep 60) & sleep 60"})
	if err != nil {
		t.Fatal(err)
	}
	second := newProvider(t, local.Options{BaseDir: base, KillGrace: 500 * time.Millisecond})
	if err := second.Destroy(ctx, h.ID()); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := pr.Wait(wctx); err != nil {
		t.Fatalf("the process survived Destroy from another provider: %v", err)
	}
	out, _ := os.ReadFile("/proc/self/stat")
	_ = out
	if _, err := os.Stat(h.ID()); !os.IsNotExist(err) {
		t.Errorf("directory still there: %v", err)
	}
	if strings.Contains(h.ID(), "..") {
		t.Fatal("unexpected id")
	}
}

// TestDestroyOfIdleHandleKillsEscapedProcessOfAnotherProvider attacks the
// idle shortcut: the handle that created the sandbox ran nothing, but a
// second provider value (standing in for another corral process) resumed
// it and started a process that left its process group with setsid. The
// creator's Destroy must still find and kill it.
func TestDestroyOfIdleHandleKillsEscapedProcessOfAnotherProvider(t *testing.T) {
	if _, err := os.Stat("/proc/self/environ"); err != nil {
		t.Skip("no /proc")
	}
	base := t.TempDir()
	ctx := context.Background()
	first := newProvider(t, local.Options{BaseDir: base, KillGrace: 500 * time.Millisecond})
	h, err := first.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second := newProvider(t, local.Options{BaseDir: base})
	h2, err := second.Resume(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	res, err := h2.Exec(ctx, sandbox.Command{Shell: "setsid sleep 60 </dev/null >/dev/null 2>&1 & echo $!"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start escaped process: %v %+v", err, res)
	}
	pid := strings.TrimSpace(string(res.Stdout))
	alive := func() bool {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return false
		}
		i := strings.LastIndexByte(string(stat), ')')
		return i > 0 && i+2 < len(stat) && stat[i+2] != 'Z'
	}
	if !alive() {
		t.Fatalf("escaped process %s is not running", pid)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	left := 0
	if alive() {
		left = 1
		_ = exec.Command("kill", "-9", pid).Run()
	}
	t.Logf("escaped processes left after Destroy: %d of 1", left)
	if left > 0 {
		t.Errorf("process %s survived Destroy of the idle-looking handle", pid)
	}
}
