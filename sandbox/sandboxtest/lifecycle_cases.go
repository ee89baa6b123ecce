package sandboxtest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// heartbeat is a shell whose real work is a backgrounded grandchild that
// appends to a file every 50 ms until a stop file appears (so a survivor
// ends once the test is over).
const heartbeat = `( while [ ! -e hb.stop ]; do echo . >> hb; sleep 0.05; done ) & wait`

// killSettle is how long a kill running in the background (a cancelled
// context) may take before the heartbeat counts as surviving: a hang
// guard, generous for a loaded machine.
const killSettle = 30 * time.Second

// testKillMeasured is how KillableProcesses is measured: kill a process
// tree whose work is done by a grandchild and prove its heartbeat stops.
func (s *suite) testKillMeasured(t *testing.T) {
	s.measureKill(t, true, func(ctx context.Context, h sandbox.Handle) (sandbox.Process, func()) {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		return pr, func() {
			if err := pr.Kill(ctx, 0); err != nil {
				t.Errorf("Kill: %v", err)
			}
		}
	})
}

// testKillByContext measures the same through cancelling the spawn context.
func (s *suite) testKillByContext(t *testing.T) {
	s.measureKill(t, false, func(ctx context.Context, h sandbox.Handle) (sandbox.Process, func()) {
		spawnCtx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		pr, err := h.Spawn(spawnCtx, sandbox.Command{Shell: heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		return pr, cancel
	})
}

// measureKill starts a heartbeat, kills it and reports whether it
// stopped. synchronous says the kill returns only once no process of the
// tree is left (Process.Kill's contract): then the heartbeat must be still
// at once, whatever the machine's load. A kill by context runs in the
// background, so the heartbeat is given up to killSettle to stop: a hang
// guard, not a deadline the provider must meet.
func (s *suite) measureKill(t *testing.T, synchronous bool, start func(context.Context, sandbox.Handle) (sandbox.Process, func())) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	t.Cleanup(func() { _ = h.FS().WriteFile(context.Background(), "hb.stop", nil) })
	pr, kill := start(ctx, h)
	go func() { _, _ = io.Copy(io.Discard, pr.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()

	size := func() int64 {
		fi, err := h.FS().Stat(ctx, "hb")
		if err != nil {
			return 0
		}
		return fi.Size
	}
	deadline := time.Now().Add(30 * time.Second)
	for size() < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	claims := s.caps.KillableProcesses
	killed := time.Now()
	kill()
	// still reads the heartbeat three times 400ms apart: a survivor
	// writes every 50ms (a starved one may miss a window, which makes the
	// measurement weaker, never wrong).
	still := func() (bool, [3]int64) {
		var n [3]int64
		for i := range n {
			if i > 0 {
				time.Sleep(400 * time.Millisecond)
			}
			n[i] = size()
		}
		return n[0] == n[1] && n[1] == n[2], n
	}
	stopped, n := still()
	if !synchronous {
		settle := killSettle
		if !claims {
			settle = 3 * time.Second // only to measure, for the skip below
		}
		for !stopped && time.Since(killed) < settle {
			stopped, n = still()
		}
	}
	a, b, c := n[0], n[1], n[2]
	switch {
	case stopped:
		t.Logf("measured: the heartbeat stood still (checked until %v after the kill began; killableProcesses=%v, synchronous kill %v)", time.Since(killed).Round(time.Millisecond), claims, synchronous)
	case claims:
		t.Fatalf("the provider claims killableProcesses, but the backgrounded grandchild kept writing after the kill (heartbeat %d -> %d -> %d bytes)", a, b, c)
	default:
		t.Skipf("provider %q does not claim killableProcesses, and measured: the grandchild survives the kill", s.h.Provider.Name())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := pr.Wait(wctx); err != nil {
		t.Errorf("Wait after a kill: %v", err)
	}
}

func (s *suite) testResumeAndDestroy(t *testing.T) {
	ctx := s.ctx(t)
	p := s.h.Provider
	h, err := p.Create(ctx, s.options(t))
	if err != nil {
		t.Fatal(err)
	}
	s.cleanup(t, h)
	writeFile(t, ctx, h, "kept.txt", []byte("kept"))

	r, err := p.Resume(ctx, h.ID())
	if err != nil {
		t.Fatalf("Resume(%s): %v", h.ID(), err)
	}
	if r.ID() != h.ID() {
		t.Errorf("resumed id %q, want %q", r.ID(), h.ID())
	}
	mustEqualBytes(t, "file after resume", readFile(t, ctx, r, "kept.txt"), []byte("kept"))
	if got := sh(t, ctx, r, "cat kept.txt"); got != "kept" {
		t.Errorf("exec after resume sees %q", got)
	}

	if err := h.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Errorf("a second Destroy must succeed: %v", err)
	}
	if err := p.Destroy(ctx, h.ID()); err != nil {
		t.Errorf("Provider.Destroy of a destroyed sandbox must succeed: %v", err)
	}
	_, err = p.Resume(ctx, h.ID())
	wantCode(t, "Resume of a destroyed sandbox", err, sandbox.NotFound)

	// Provider.Destroy by id, from a fresh handle's point of view.
	h2 := s.create(t, ctx)
	if err := p.Destroy(ctx, h2.ID()); err != nil {
		t.Fatalf("Provider.Destroy: %v", err)
	}
	_, err = p.Resume(ctx, h2.ID())
	wantCode(t, "Resume after Provider.Destroy", err, sandbox.NotFound)
	if _, err := h2.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err == nil {
		t.Error("Exec on a destroyed sandbox must fail")
	}
}

func (s *suite) testFork(t *testing.T) {
	s.skipUnless(t, "fork")
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	writeFile(t, ctx, h, "dir/shared.txt", []byte("before fork"))
	f, err := h.Fork(ctx)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	s.cleanup(t, f)
	if f.ID() == h.ID() {
		t.Fatalf("the fork has its parent's id %q", f.ID())
	}
	mustEqualBytes(t, "fork has the parent's files", readFile(t, ctx, f, "dir/shared.txt"), []byte("before fork"))
	writeFile(t, ctx, f, "fork-only.txt", []byte("f"))
	writeFile(t, ctx, h, "parent-only.txt", []byte("p"))
	writeFile(t, ctx, f, "dir/shared.txt", []byte("changed in fork"))
	if ok, _ := h.FS().Exists(ctx, "fork-only.txt"); ok {
		t.Error("a file written in the fork appeared in the parent")
	}
	if ok, _ := f.FS().Exists(ctx, "parent-only.txt"); ok {
		t.Error("a file written in the parent appeared in the fork")
	}
	mustEqualBytes(t, "parent unchanged", readFile(t, ctx, h, "dir/shared.txt"), []byte("before fork"))
	if got := sh(t, ctx, f, "cat fork-only.txt"); got != "f" {
		t.Errorf("exec in the fork sees %q", got)
	}
}

func (s *suite) testSnapshotRestore(t *testing.T) {
	s.skipUnless(t, "snapshots")
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	writeFile(t, ctx, h, "state/data.txt", []byte("snapshotted"))
	snap, err := h.Snapshot(ctx, "conformance")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if snap.ID == "" {
		t.Fatal("Snapshot returned an empty id")
	}
	writeFile(t, ctx, h, "state/data.txt", []byte("changed after"))
	r, err := s.h.Provider.RestoreSnapshot(ctx, snap.ID, s.options(t))
	if err != nil {
		t.Fatalf("RestoreSnapshot(%s): %v", snap.ID, err)
	}
	s.cleanup(t, r)
	if r.ID() == h.ID() {
		t.Fatalf("the restored sandbox has the original's id %q", r.ID())
	}
	mustEqualBytes(t, "restored file", readFile(t, ctx, r, "state/data.txt"), []byte("snapshotted"))
	writeFile(t, ctx, r, "restored-only.txt", nil)
	if ok, _ := h.FS().Exists(ctx, "restored-only.txt"); ok {
		t.Error("a file written in the restored sandbox appeared in the original")
	}
	_, err = s.h.Provider.RestoreSnapshot(ctx, "corral-no-such-snapshot:nope", s.options(t))
	wantCode(t, "RestoreSnapshot of a missing snapshot", err, sandbox.NotFound, sandbox.InvalidArgument)

	// A snapshot nobody uses any more can be deleted, twice.
	snap2, err := h.Snapshot(ctx, "to-delete")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if err := s.h.Provider.DeleteSnapshot(ctx, snap2.ID); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if err := s.h.Provider.DeleteSnapshot(ctx, snap2.ID); err != nil {
		t.Errorf("deleting a deleted snapshot must succeed: %v", err)
	}
	_, err = s.h.Provider.RestoreSnapshot(ctx, snap2.ID, s.options(t))
	wantCode(t, "RestoreSnapshot of a deleted snapshot", err, sandbox.NotFound)
}

func (s *suite) testPorts(t *testing.T) {
	s.skipUnless(t, "ports")
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	port := s.h.Port
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	server := ""
	for _, c := range []string{"busybox httpd", "httpd"} {
		res, err := h.Exec(ctx, sandbox.Command{Shell: c + " --help >/dev/null 2>&1; command -v " + strings.Fields(c)[0]})
		if err == nil && res.ExitCode == 0 {
			server = c
			break
		}
	}
	if server == "" {
		t.Skip("no HTTP server program in the sandbox (busybox httpd); the ports case needs one")
	}
	writeFile(t, ctx, h, "www/index.html", []byte("served from the sandbox"))
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: server + " -f -p " + strconv.Itoa(port) + " -h www"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.Kill(context.Background(), 0) })
	ep, err := h.ConnectPort(ctx, port)
	if err != nil {
		t.Fatalf("ConnectPort(%d): %v", port, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", strings.TrimSuffix(ep.URL, "/")+"/index.html", nil)
		for k, v := range ep.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) == "served from the sandbox" {
				return
			}
			err = fmt.Errorf("status %s, body %q", resp.Status, body)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", ep.URL, last)
}
