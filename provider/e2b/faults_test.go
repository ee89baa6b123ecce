package e2b_test

import (
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing key names E2B_API_KEY; 401, 403, 404 and 429
// carry their codes, name E2B and never the key.
func TestErrors(t *testing.T) {
	if _, err := e2b.New(e2b.Options{}); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "E2B needs E2B_API_KEY") {
		t.Fatalf("missing key: %v", err)
	}
	for _, tc := range []struct {
		name   string
		key    string
		status int
		want   sandbox.Code
	}{
		{"bad key", "e2b_wrong_key_0123456789", 0, sandbox.PermissionDenied},
		{"403", "", 403, sandbox.PermissionDenied},
		{"404", "", 404, sandbox.NotFound},
		{"429", "", 429, sandbox.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.HangGuard(t)
			f := newFake(t)
			p, _ := newProvider(t, f, e2b.Options{APIKey: tc.key})
			if tc.status != 0 {
				f.Inject("connect", fakecloud.Fault{Status: tc.status, Times: 10})
			}
			_, err := p.Resume(ctx, "i0123456789abcdef")
			t.Logf("%s: %v", tc.name, err)
			if sandbox.CodeOf(err) != tc.want {
				t.Fatalf("code %v, want %v: %v", sandbox.CodeOf(err), tc.want, err)
			}
			if !strings.Contains(err.Error(), "e2b") {
				t.Errorf("the error does not name the backend: %v", err)
			}
			for _, secret := range []string{testKey, tc.key} {
				if secret != "" && strings.Contains(err.Error(), secret) {
					t.Errorf("the error carries the key: %v", err)
				}
			}
		})
	}
}

// TestDroppedStream is E2B issue 1587's failure: after one process's
// output stream dies, the other streams must keep flowing, and a
// re-attach must still work. Three commands write 256 KiB each and then
// wait on a gate before exiting 5; one Start stream is dropped after
// 64 KiB. The other two deliver every byte; the dropped one's Wait
// re-attaches by pid (envd's Connect) and gets the real exit code once
// the gate opens.
func TestDroppedStream(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	for _, g := range []string{"gate1", "gate2"} {
		if err := h.FS().WriteFile(ctx, g, nil); err != nil {
			t.Fatal(err)
		}
	}
	const size = 256 << 10
	script := `while [ -e gate1 ]; do sleep 0.05; done; head -c 262144 /dev/zero; while [ -e gate2 ]; do sleep 0.05; done; exit 5`
	drop := f.Inject("start", fakecloud.Fault{DropAfter: 64 << 10})
	var procs []sandbox.Process
	for range 3 {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: script})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
		procs = append(procs, pr)
	}
	got := make([]int64, 3)
	var wg sync.WaitGroup
	for i, pr := range procs {
		wg.Go(func() { got[i], _ = io.CopyN(io.Discard, pr.Stdout(), size) })
	}
	if err := h.FS().RemoveAll(ctx, "gate1"); err != nil {
		t.Fatal(err)
	}
	wg.Wait() // the two undropped streams delivered size bytes while all three still run
	reattachesBefore := f.Count("procConnect")
	if err := h.FS().RemoveAll(ctx, "gate2"); err != nil {
		t.Fatal(err)
	}
	codes := make([]int, 3)
	errs := make([]error, 3)
	for i, pr := range procs {
		codes[i], errs[i] = pr.Wait(ctx)
	}
	t.Logf("dropped streams %d; bytes delivered %v of %d each; exit codes %v (errors %v); re-attaches %d",
		drop.Drops(), got, size, codes, errs, f.Count("procConnect")-reattachesBefore)
	if drop.Drops() != 1 {
		t.Fatalf("the fault dropped %d streams, want 1", drop.Drops())
	}
	full := 0
	for i := range got {
		if errs[i] != nil || codes[i] != 5 {
			t.Errorf("process %d: exit %d, %v; want 5", i, codes[i], errs[i])
		}
		if got[i] == size {
			full++
		}
	}
	if full != 2 || f.Count("procConnect")-reattachesBefore != 1 {
		t.Fatalf("%d of the 2 undropped streams delivered everything; %d re-attaches, want 1", full, f.Count("procConnect")-reattachesBefore)
	}
}
