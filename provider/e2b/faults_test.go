package e2b_test

import (
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
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
			ctx := hangGuard(t)
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
// output stream dies, the other streams must keep flowing. Three commands
// write 256 KiB each; one Start stream is dropped after 64 KiB. The
// dropped one's Wait re-attaches by pid (Connect); its process has ended
// by then and envd forgets ended processes, so it is Unavailable, never a
// made-up code.
func TestDroppedStream(t *testing.T) {
	ctx := hangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	h := create(t, ctx, p, sandbox.CreateOptions{})
	if err := h.FS().WriteFile(ctx, "gate", nil); err != nil {
		t.Fatal(err)
	}
	const size = 256 << 10
	script := `while [ -e gate ]; do sleep 0.05; done; head -c ` + "262144" + ` /dev/zero`
	drop := f.Inject("start", fakecloud.Fault{DropAfter: 64 << 10})
	var procs []sandbox.Process
	for range 3 {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: script})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, pr)
	}
	got := make([]int64, 3)
	var wg sync.WaitGroup
	for i, pr := range procs {
		wg.Go(func() {
			go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
			got[i], _ = io.Copy(io.Discard, pr.Stdout())
		})
	}
	if err := h.FS().RemoveAll(ctx, "gate"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	codes := make([]int, 3)
	var errs []error
	for i, pr := range procs {
		c, err := pr.Wait(ctx)
		codes[i] = c
		errs = append(errs, err)
	}
	t.Logf("dropped streams %d; bytes delivered %v of %d each; exit codes %v (errors %v)", drop.Drops(), got, size, codes, errs)
	if drop.Drops() != 1 {
		t.Fatalf("the fault dropped %d streams, want 1", drop.Drops())
	}
	full := 0
	for i := range got {
		if got[i] == size && codes[i] == 0 && errs[i] == nil {
			full++
		}
	}
	if full != 2 {
		t.Fatalf("%d of the 2 undropped streams delivered everything", full)
	}
	for i := range got {
		if got[i] != size && sandbox.CodeOf(errs[i]) != sandbox.Unavailable {
			t.Fatalf("the dropped process's Wait: %v, want Unavailable", errs[i])
		}
	}
}
