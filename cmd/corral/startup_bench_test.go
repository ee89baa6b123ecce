package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
