package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/internal/lean"
)

// BenchmarkStartup times `corral version` as a whole process (the start-up
// cost every CLI call pays: the runtime, the package inits of everything
// linked, the providers' registrations) against the raw floors: a Go
// program that only prints, and /bin/true. binary-MB is the size of the
// program started.
func BenchmarkStartup(b *testing.B) {
	dir := b.TempDir()
	floor := filepath.Join(dir, "hello")
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", floor, src).CombinedOutput(); err != nil {
		b.Fatalf("building the floor program: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name string
		argv []string
	}{
		{"corral-version", []string{corralBin, "version"}},
		{"raw-go-hello", []string{floor}},
		{"raw-bin-true", []string{"/bin/true"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			fi, err := os.Stat(c.argv[0])
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := exec.Command(c.argv[0], c.argv[1:]...).Run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "binary-MB")
		})
	}
}

// BenchmarkIdleRSS starts `corral serve` (local provider, SQLite) and
// reports its resident memory once it serves, against the raw floor: a Go
// program that only serves net/http on loopback. idle-rss-MB is VmRSS
// from /proc; the daemon has trimmed its start-up pages by then
// (internal/lean).
func BenchmarkIdleRSS(b *testing.B) {
	dir := b.TempDir()
	floor := filepath.Join(dir, "httpd")
	src := filepath.Join(dir, "main.go")
	prog := "package main\n\nimport (\n\t\"fmt\"\n\t\"net\"\n\t\"net/http\"\n\t\"os\"\n)\n\n" +
		"func main() {\n\tln, err := net.Listen(\"tcp\", \"127.0.0.1:0\")\n\tif err != nil {\n\t\tpanic(err)\n\t}\n" +
		"\tfmt.Fprintf(os.Stderr, \"corral: serving on http://%s (definitions: floor)\\n\", ln.Addr())\n\t_ = http.Serve(ln, nil)\n}\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		b.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", floor, src).CombinedOutput(); err != nil {
		b.Fatalf("building the floor program: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name  string
		start func(b *testing.B) *served
	}{
		{"corral-serve", func(b *testing.B) *served { return serveCLI(b, b.TempDir()) }},
		{"raw-go-httpd", func(b *testing.B) *served { return serveProgram(b, floor) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var total float64
			n := 0
			for b.Loop() {
				s := c.start(b)
				total += float64(vmRSS(b, s.cmd.Process.Pid)) / 1024
				n++
				s.stop(b)
			}
			b.ReportMetric(total/float64(n), "idle-rss-MB")
		})
	}
}

// serveProgram starts a program that prints corral's "serving on" line,
// as serveCLIEnv does for corral serve.
func serveProgram(b *testing.B, path string) *served {
	b.Helper()
	return startServed(b, exec.Command(path))
}

// vmRSS is a process's resident set in kB.
func vmRSS(b *testing.B, pid int) int64 {
	b.Helper()
	n, err := lean.StatusKB(pid, "VmRSS")
	if err != nil {
		b.Fatal(err)
	}
	return n
}
