package qemu_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/sandbox"
)

func TestBootExec(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	t0 := time.Now()
	h := create(t, p, sandbox.CreateOptions{Env: map[string]string{"GREETING": "hi there"}})
	t.Logf("accel %s, create %v", p.Accel(), time.Since(t0))
	ctx := context.Background()
	res, err := h.Exec(ctx, sandbox.Command{Shell: `echo "$GREETING"; pwd; exit 3`})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "hi there\n/workspace\n" || res.ExitCode != 3 {
		t.Fatalf("stdout %q code %d stderr %q", got, res.ExitCode, res.Stderr)
	}
	if err := h.FS().WriteFile(ctx, "a/b.txt", []byte("x")); err != nil {
		t.Fatal(err)
	}
	b, err := h.FS().ReadFile(ctx, "a/b.txt")
	if err != nil || string(b) != "x" {
		t.Fatalf("ReadFile %q %v", b, err)
	}
	res, err = h.Exec(ctx, sandbox.Command{Args: []string{"date", "+%s"}})
	if err != nil || !strings.HasPrefix(string(res.Stdout), "1") {
		t.Fatalf("date: %v %q", err, res.Stdout)
	}
}
