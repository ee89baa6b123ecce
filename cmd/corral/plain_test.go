package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
)

// TestPlainLanguage pins what scripts and people read: a detached run
// prints its id alone on stdout and exits 0; an unknown run is "no such
// run" for every command that takes one; a failed run says its error once.
func TestPlainLanguage(t *testing.T) {
	dir := t.TempDir()
	store := "sqlite:" + filepath.Join(dir, "corral.db")

	out, errOut, code := corral(t, "run", "-d", "--store", store, "--", "sh", "-c", "echo hi")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "run-") || strings.Contains(id, "\n") {
		t.Fatalf("run -d: exit %d, stdout %q, stderr %q; want the run id alone on stdout and exit 0", code, out, errOut)
	}
	if !strings.Contains(errOut, "corral attach "+id) {
		t.Errorf("run -d: stderr %q does not say how to attach", errOut)
	}
	out, _, code = corral(t, "attach", id, "--from", "0", "--store", store)
	if code != 0 || out != "hi\n" {
		t.Errorf("attach %s: exit %d, stdout %q", id, code, out)
	}

	for _, args := range [][]string{
		{"attach", "run-nope"}, {"logs", "run-nope"}, {"cancel", "run-nope"},
	} {
		_, errOut, code := corral(t, append(args, "--store", store)...)
		if code != 1 || strings.TrimSpace(errOut) != "corral: no such run: run-nope" {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and \"corral: no such run: run-nope\"", args[0], code, errOut)
		}
	}

}

// TestFailedCreateSaidOnce: a run whose Docker sandbox cannot be made
// prints the error once (it was printed as the run's error event and again
// as the exit message).
func TestFailedCreateSaidOnce(t *testing.T) {
	testutil.NeedDocker(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(cfg, []byte("provider:\n  name: docker\n  docker:\n    image: corral-no-such-image:1\n    pull: never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := corral(t, "run", "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "corral.db"), "--", "true")
	if code != 1 {
		t.Fatalf("run with a missing image: exit %d, want 1; stderr %q", code, errOut)
	}
	lines := strings.Count(errOut, "corral-no-such-image:1")
	t.Logf("failed create: exit %d, the error said %d time(s):\n%s", code, lines, errOut)
	if lines == 0 || strings.Count(errOut, "pull policy is never") != 1 {
		t.Errorf("want the error said once:\n%s", errOut)
	}
}
