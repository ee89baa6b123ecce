package server_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/server"
)

var tokenRE = regexp.MustCompile(`^[0-9a-f]{48}$`)

func TestTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "corral")
	path := filepath.Join(dir, api.TokenFileName)
	tok, created, err := server.LoadOrCreateToken(path)
	if err != nil || !created || !tokenRE.MatchString(tok) {
		t.Fatalf("first start: %q created=%v err=%v, want a new 192-bit hex token", tok, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v (%v), want 0600", fi.Mode(), err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("state directory mode %v (%v), want 0700", di.Mode(), err)
	}
	for i := range 3 {
		again, created, err := server.LoadOrCreateToken(path)
		if err != nil || created || again != tok {
			t.Fatalf("start %d: %q created=%v err=%v, want the same token reused", i+2, again, created, err)
		}
	}
	if got, err := api.ReadToken(path); err != nil || got != tok {
		t.Fatalf("api.ReadToken: %q %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("the state directory holds %v, want the token file only", entries)
	}

	// Daemons started at once agree on one token.
	path2 := filepath.Join(t.TempDir(), api.TokenFileName)
	const n = 16
	toks := make([]string, n)
	made := make([]bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var err error
			toks[i], made[i], err = server.LoadOrCreateToken(path2)
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	creators := 0
	for i := range n {
		if toks[i] != toks[0] {
			t.Fatalf("concurrent starts got tokens %q and %q", toks[0], toks[i])
		}
		if made[i] {
			creators++
		}
	}
	if creators != 1 {
		t.Fatalf("%d of %d concurrent starts made the token, want 1", creators, n)
	}
	t.Logf("token file %04o in a %04o directory, reused on 3 restarts; %d concurrent starts, 1 token", fi.Mode().Perm(), 0o700, n)

	// A file others may read, or that holds no token, is refused.
	for _, c := range []struct {
		name, content string
		mode          os.FileMode
	}{
		{"world-readable", tok + "\n", 0o644},
		{"group-readable", tok + "\n", 0o640},
		{"empty", "", 0o600},
		{"two tokens", tok + " " + tok + "\n", 0o600},
	} {
		p := filepath.Join(t.TempDir(), api.TokenFileName)
		if err := os.WriteFile(p, []byte(c.content), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		if got, _, err := server.LoadOrCreateToken(p); err == nil {
			t.Errorf("%s token file: accepted (%q)", c.name, got)
		}
	}
}
