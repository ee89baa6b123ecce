package docker

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/registry"

	"github.com/d10ffeed/corral/sandbox"
)

func TestParsePullPolicy(t *testing.T) {
	for in, want := range map[string]PullPolicy{"": PullMissing, "missing": PullMissing, "always": PullAlways, " never ": PullNever} {
		got, err := ParsePullPolicy(in)
		if err != nil || got != want {
			t.Errorf("ParsePullPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"Always", "IfNotPresent", "sometimes"} {
		if _, err := ParsePullPolicy(in); err == nil {
			t.Errorf("ParsePullPolicy(%q) accepted", in)
		}
	}
	_, err := New(Options{Image: "x", Pull: "sometimes"})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("New with a bad pull policy: %v, want InvalidArgument", err)
	}
}

func TestRegistryOf(t *testing.T) {
	for image, want := range map[string]string{
		"node:22":                      "docker.io",
		"library/node:22":              "docker.io",
		"user/app":                     "docker.io",
		"docker.io/library/node":       "docker.io",
		"index.docker.io/user/app":     "docker.io",
		"ghcr.io/owner/app:1":          "ghcr.io",
		"127.0.0.1:5000/corral:x":      "127.0.0.1:5000",
		"localhost/app":                "localhost",
		"registry.example.com/a/b/c":   "registry.example.com",
		"node@sha256:0123456789abcdef": "docker.io",
	} {
		if got := registryOf(image); got != want {
			t.Errorf("registryOf(%q) = %q, want %q", image, got, want)
		}
	}
}

// decodeAuth reads an X-Registry-Auth value back.
func decodeAuth(t *testing.T, h string) registry.AuthConfig {
	t.Helper()
	b, err := base64.URLEncoding.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	var ac registry.AuthConfig
	if err := json.Unmarshal(b, &ac); err != nil {
		t.Fatal(err)
	}
	return ac
}

func TestRegistryAuth(t *testing.T) {
	dir := t.TempDir()
	cfg := `{
	  "auths": {
	    "https://index.docker.io/v1/": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("hubuser:hub:pass")) + `"},
	    "http://127.0.0.1:5000/v2/": {"auth": "` + base64.StdEncoding.EncodeToString([]byte("local:pw")) + `"},
	    "ghcr.io": {"identitytoken": "tok-123"},
	    "bad.example": {"auth": "%%%"}
	  },
	  "credHelpers": {"helped.example": "ecr-login"}
	}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h, _, err := registryAuth(dir, "docker.io")
	if ac := decodeAuth(t, h); err != nil || ac.Username != "hubuser" || ac.Password != "hub:pass" {
		t.Errorf("docker.io: %+v, %v", ac, err)
	}
	h, _, err = registryAuth(dir, "127.0.0.1:5000")
	if ac := decodeAuth(t, h); err != nil || ac.Username != "local" || ac.Password != "pw" || ac.ServerAddress != "127.0.0.1:5000" {
		t.Errorf("127.0.0.1:5000: %+v, %v", ac, err)
	}
	h, _, err = registryAuth(dir, "ghcr.io")
	if ac := decodeAuth(t, h); err != nil || ac.IdentityToken != "tok-123" || ac.Password != "" {
		t.Errorf("ghcr.io: %+v, %v", ac, err)
	}
	h, note, err := registryAuth(dir, "helped.example")
	if err != nil || h != "" || !strings.Contains(note, "docker-credential-ecr-login") {
		t.Errorf("credential helper: header %q note %q err %v", h, note, err)
	}
	if h, _, err := registryAuth(dir, "none.example"); err != nil || h != "" {
		t.Errorf("no entry: header %q err %v", h, err)
	}
	if _, _, err := registryAuth(dir, "bad.example"); err == nil || strings.Contains(err.Error(), "%%%") {
		t.Errorf("a bad entry: %v (want an error that does not quote it)", err)
	}
	if h, _, err := registryAuth(t.TempDir(), "docker.io"); err != nil || h != "" {
		t.Errorf("no config file: header %q err %v", h, err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "config.json"), []byte(`{"auths": {"x": {"auth": "c2VjcmV0LXB3"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := registryAuth(broken, "x"); err == nil || strings.Contains(err.Error(), "c2VjcmV0LXB3") {
		t.Errorf("broken JSON: %v (want an error that does not quote the file)", err)
	}
}

func TestPullProgressString(t *testing.T) {
	s := PullProgress{Image: "node:22", Layer: "abc123", Status: "Downloading", Total: 2048}.String()
	if s != "pull node:22 abc123: Downloading (2048 bytes)" {
		t.Errorf("String() = %q", s)
	}
}
