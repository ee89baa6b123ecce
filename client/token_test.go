package client_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
)

func TestResolveToken(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("CORRAL_TOKEN", "")
	path := filepath.Join(state, "corral", api.TokenFileName)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	check := func(what, url, explicit, want string) {
		t.Helper()
		got, err := client.ResolveToken(url, explicit)
		if err != nil || got != want {
			t.Errorf("%s: ResolveToken(%q, %q) = %q, %v; want %q", what, url, explicit, got, err, want)
		}
	}
	check("no file", "http://127.0.0.1:7777", "", "")
	if err := os.WriteFile(path, []byte("from-the-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://127.0.0.1:7777", "http://localhost:7777", "http://[::1]:7777", "http://127.0.0.2:80"} {
		check("loopback", u, "", "from-the-file")
	}
	for _, u := range []string{"http://10.1.2.3:7777", "https://corral.example", "http://localhost.example:7777", "http://127.0.0.1.example"} {
		check("not loopback: the local token stays here", u, "", "")
	}
	check("explicit", "http://127.0.0.1:7777", "flag", "flag")
	t.Setenv("CORRAL_TOKEN", "env")
	check("env", "http://127.0.0.1:7777", "", "env")
	check("env, remote", "http://10.1.2.3:7777", "", "env")
	check("explicit over env", "http://127.0.0.1:7777", "flag", "flag")
	t.Setenv("CORRAL_TOKEN", "")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := client.ResolveToken("http://127.0.0.1:7777", ""); err == nil {
		t.Errorf("a token file others can read: %q, no error", got)
	}
}
