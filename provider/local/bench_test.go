package local_test

// Benchmarks run each operation through corral ("corral") and through the
// raw floor of os/exec and os ("floor") as sibling sub-benchmarks, so the
// ratio corral/floor can be read from one run:
//
//	go test -run '^$' -bench . ./provider/local/

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

func benchSandbox(b *testing.B) (sandbox.Handle, string) {
	b.Helper()
	p, err := local.New(local.Options{BaseDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h, h.ID()
}

func floorRun(b *testing.B, dir string, argv ...string) []byte {
	b.Helper()
	var out, errb bytes.Buffer
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir, c.Stdout, c.Stderr = dir, &out, &errb
	if err := c.Run(); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

func corralRun(b *testing.B, h sandbox.Handle, cmd sandbox.Command) *sandbox.ExecResult {
	b.Helper()
	res, err := h.Exec(context.Background(), cmd)
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("exec: %v %+v", err, res)
	}
	return res
}

func BenchmarkExecTrue(b *testing.B) {
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		for b.Loop() {
			corralRun(b, h, sandbox.Command{Args: []string{"true"}})
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			floorRun(b, dir, "true")
		}
	})
}

func BenchmarkExecShTrue(b *testing.B) {
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		for b.Loop() {
			corralRun(b, h, sandbox.Command{Shell: "true"})
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			floorRun(b, dir, "sh", "-c", "true")
		}
	})
}

const mib = 1 << 20

func BenchmarkExec1MiBStdout(b *testing.B) {
	argv := []string{"head", "-c", fmt.Sprint(mib), "/dev/zero"}
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		b.SetBytes(mib)
		for b.Loop() {
			if res := corralRun(b, h, sandbox.Command{Args: argv}); len(res.Stdout) != mib {
				b.Fatal(len(res.Stdout))
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(mib)
		for b.Loop() {
			if out := floorRun(b, dir, argv...); len(out) != mib {
				b.Fatal(len(out))
			}
		}
	})
}

// BenchmarkSpawn starts a process with streamed output and waits for it.
func BenchmarkSpawn(b *testing.B) {
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		ctx := context.Background()
		for b.Loop() {
			pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"true"}})
			if err != nil {
				b.Fatal(err)
			}
			if code, err := pr.Wait(ctx); err != nil || code != 0 {
				b.Fatal(code, err)
			}
			pr.Stdin().Close()
			pr.Stdout().(interface{ Close() error }).Close()
			pr.Stderr().(interface{ Close() error }).Close()
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			c := exec.Command("true")
			c.Dir = dir
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if _, err := c.StdinPipe(); err != nil {
				b.Fatal(err)
			}
			if _, err := c.StdoutPipe(); err != nil {
				b.Fatal(err)
			}
			if _, err := c.StderrPipe(); err != nil {
				b.Fatal(err)
			}
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			if err := c.Wait(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkKillTree kills a shell with a backgrounded grandchild and waits
// until the whole tree is gone. It reports survivors (want 0).
func BenchmarkKillTree(b *testing.B) {
	const tree = "sleep 30 & sleep 30"
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		ctx := context.Background()
		survivors := 0
		for b.Loop() {
			pr, err := h.Spawn(ctx, sandbox.Command{Shell: tree})
			if err != nil {
				b.Fatal(err)
			}
			if err := pr.Kill(ctx, 0); err != nil {
				b.Fatal(err)
			}
			if _, err := pr.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			survivors += liveInGroup(pr.PID())
			pr.Stdout().(interface{ Close() error }).Close()
			pr.Stderr().(interface{ Close() error }).Close()
			pr.Stdin().Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(survivors), "survivors")
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		survivors := 0
		for b.Loop() {
			var out bytes.Buffer
			c := exec.Command("sh", "-c", tree)
			c.Dir, c.Stdout = dir, &out
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := c.Start(); err != nil {
				b.Fatal(err)
			}
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
			_ = c.Wait() // returns once the grandchild closed stdout too
			b.StopTimer()
			survivors += liveInGroup(c.Process.Pid)
			b.StartTimer()
		}
		b.ReportMetric(float64(survivors), "survivors")
	})
}

// liveInGroup counts the group's members that are not zombies.
func liveInGroup(pgid int) int {
	n := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+2:])
		if len(f) > 2 && string(f[2]) == fmt.Sprint(pgid) && f[0][0] != 'Z' {
			n++
		}
	}
	return n
}

func BenchmarkFile1MiBWriteRead(b *testing.B) {
	data := bytes.Repeat([]byte("corral!\n"), mib/8)
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		ctx := context.Background()
		b.SetBytes(2 * mib)
		for b.Loop() {
			if err := h.FS().WriteFile(ctx, "big.bin", data); err != nil {
				b.Fatal(err)
			}
			if got, err := h.FS().ReadFile(ctx, "big.bin"); err != nil || len(got) != mib {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		b.SetBytes(2 * mib)
		name := filepath.Join(dir, "big.bin")
		for b.Loop() {
			if err := os.WriteFile(name, data, 0o644); err != nil {
				b.Fatal(err)
			}
			if got, err := os.ReadFile(name); err != nil || len(got) != mib {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSmallFiles writes and then reads 1000 files of 256 bytes in a
// nested directory (the floor makes the parent with MkdirAll, as corral's
// WriteFile must).
func BenchmarkSmallFiles(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 256)
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		ctx := context.Background()
		fs := h.FS()
		for b.Loop() {
			for i := range 1000 {
				if err := fs.WriteFile(ctx, fmt.Sprintf("d/f%d", i), data); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 1000 {
				if _, err := fs.ReadFile(ctx, fmt.Sprintf("d/f%d", i)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			for i := range 1000 {
				if err := os.MkdirAll(filepath.Join(dir, "d"), 0o755); err != nil {
					b.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("f%d", i)), data, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			for i := range 1000 {
				if _, err := os.ReadFile(filepath.Join(dir, "d", fmt.Sprintf("f%d", i))); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// BenchmarkConcurrentExec16 runs 16 execs of true at once per iteration.
func BenchmarkConcurrentExec16(b *testing.B) {
	b.Run("corral", func(b *testing.B) {
		h, _ := benchSandbox(b)
		for b.Loop() {
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() { corralRun(b, h, sandbox.Command{Args: []string{"true"}}) })
			}
			wg.Wait()
		}
	})
	b.Run("floor", func(b *testing.B) {
		dir := b.TempDir()
		for b.Loop() {
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() { floorRun(b, dir, "true") })
			}
			wg.Wait()
		}
	})
}

// BenchmarkDestroyIdle destroys a sandbox that ran nothing; the floor
// removes a directory of the same shape. Creation is outside the timer.
func BenchmarkDestroyIdle(b *testing.B) {
	b.Run("corral", func(b *testing.B) {
		p, err := local.New(local.Options{BaseDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		for b.Loop() {
			b.StopTimer()
			h, err := p.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := h.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		base := b.TempDir()
		for i := 0; b.Loop(); i++ {
			b.StopTimer()
			dir := filepath.Join(base, fmt.Sprintf("sb-%d", i))
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			root, err := os.OpenRoot(dir)
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			_ = root.Close()
			if err := os.RemoveAll(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}
