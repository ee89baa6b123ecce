package docker

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

func TestContainerName(t *testing.T) {
	for id, want := range map[string]string{
		"my-box":      "my-box",
		"a.b_c-1":     "a.b_c-1",
		"thread:42/x": "corral-thread-42-x-",
		"-leading":    "corral-leading-",
		"x":           "corral-x-",
		"ünï":         "corral-",
		"":            "corral-",
	} {
		got := containerName(id)
		if !strings.HasPrefix(got, want) || !validName.MatchString(got) {
			t.Errorf("containerName(%q) = %q, want a valid name starting %q", id, got, want)
		}
		if containerName(id) != got {
			t.Errorf("containerName(%q) is not deterministic", id)
		}
	}
	if containerName("a/b") == containerName("a:b") {
		t.Error("different ids that sanitize alike must get different names")
	}
	long := strings.Repeat("k", 300)
	if n := containerName(long); len(n) > 128 || !validName.MatchString(n) {
		t.Errorf("containerName of a long id = %q", n)
	}
	if !validName.MatchString(newName()) || newName() == newName() {
		t.Error("newName must be valid and fresh")
	}
}

// TestDaemonCalls pins how many Engine API requests each operation makes:
// what the benchmarks compare with the floor is mostly this count.
func TestDaemonCalls(t *testing.T) {
	p0, err := New(Options{Image: testImageName()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p0.Ping(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err.Error())
	}
	if err := p0.CheckImage(ctx); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err.Error())
	}
	_ = p0.Close()
	var mu sync.Mutex
	var calls []string
	hook := client.WithHTTPRequestHook(func(r *http.Request) error {
		mu.Lock()
		defer mu.Unlock()
		p := r.URL.Path
		if i := strings.Index(p[1:], "/"); strings.HasPrefix(p, "/v") && i > 0 {
			p = p[i+1:]
		}
		calls = append(calls, r.Method+" "+p)
		return nil
	})
	p, err := newProvider(Options{Image: testImageName(), Labels: map[string]string{"dev.corral.test-run": "daemon-calls"}}, hook)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil { // negotiation, once per provider
		t.Fatal(err)
	}
	count := func(what string, fn func()) {
		t.Helper()
		mu.Lock()
		calls = nil
		mu.Unlock()
		fn()
		mu.Lock()
		defer mu.Unlock()
		t.Logf("%s: %d calls: %s", what, len(calls), strings.Join(calls, ", "))
	}
	want := func(what string, n int, fn func()) {
		t.Helper()
		count(what, fn)
		mu.Lock()
		defer mu.Unlock()
		if len(calls) != n {
			t.Errorf("%s made %d calls, want %d", what, len(calls), n)
		}
	}
	var h sandbox.Handle
	want("Create", 2, func() {
		if h, err = p.Create(ctx, sandbox.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	defer h.Destroy(context.Background())
	// Exec: create, attach (start), inspect; inspect may repeat while the
	// daemon records the exit, which the floor does not check.
	count("Exec", func() {
		if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
	})
	mu.Lock()
	if len(calls) < 3 || calls[0] != "POST /containers/"+h.(*handle).cid+"/exec" {
		t.Errorf("Exec calls: %v", calls)
	}
	mu.Unlock()
	pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Killing an exited process is a no-op: no call, whatever the load.
	want("Kill after exit", 0, func() {
		if err := pr.Kill(ctx, 0); err != nil {
			t.Fatal(err)
		}
	})
	count("WriteFile", func() {
		if err := h.FS().WriteFile(ctx, "f", []byte("x")); err != nil {
			t.Fatal(err)
		}
	})
	count("ReadFile", func() {
		if _, err := h.FS().ReadFile(ctx, "f"); err != nil {
			t.Fatal(err)
		}
	})
	var snap sandbox.Snapshot
	want("Snapshot", 1, func() {
		if snap, err = h.Snapshot(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	})
	var f sandbox.Handle
	want("Fork", 3, func() {
		if f, err = h.Fork(ctx); err != nil {
			t.Fatal(err)
		}
	})
	want("Destroy (a fork: container, then its image)", 2, func() {
		if err := f.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	})
	want("Destroy", 1, func() {
		if err := h.Destroy(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := p.cli.ImageRemove(ctx, snap.ID, client.ImageRemoveOptions{}); err != nil {
		t.Error(err)
	}
}

func testImageName() string {
	if v := os.Getenv("CORRAL_DOCKER_TEST_IMAGE"); v != "" {
		return v
	}
	return "corral-test-base"
}
