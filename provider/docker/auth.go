package docker

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/moby/moby/api/types/registry"
)

// dockerConfigFile is the part of ~/.docker/config.json corral reads.
type dockerConfigFile struct {
	Auths       map[string]dockerAuth `json:"auths"`
	CredsStore  string                `json:"credsStore"`
	CredHelpers map[string]string     `json:"credHelpers"`
}

// dockerAuth is one auths entry: "auth" is base64 "user:pass"; an
// identity token replaces the password.
type dockerAuth struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// dockerConfigDir returns the Docker config directory: dir when set, else
// DOCKER_CONFIG, else ~/.docker.
func dockerConfigDir(dir string) string {
	if dir != "" {
		return dir
	}
	if d := os.Getenv("DOCKER_CONFIG"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".docker")
}

// authKeys are the auths keys that may name reg: the host itself, with a
// scheme and a path, and Docker Hub's historical index address.
func authKeys(reg string) []string {
	if reg == "docker.io" {
		return []string{"https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io", "https://registry-1.docker.io"}
	}
	return []string{reg}
}

// hostOfKey strips a scheme and a path from an auths key.
func hostOfKey(k string) string {
	k = strings.TrimPrefix(strings.TrimPrefix(k, "https://"), "http://")
	if i := strings.IndexByte(k, '/'); i >= 0 {
		k = k[:i]
	}
	return k
}

// registryAuth returns the X-Registry-Auth value for reg from the Docker
// config in dir ("" when the config has no entry for it, or there is no
// config), and a note for an unauthorized error when the config delegates
// to a credential helper, which corral does not run. The credentials are
// never logged and never part of an error.
func registryAuth(dir, reg string) (header, note string, err error) {
	dir = dockerConfigDir(dir)
	if dir == "" {
		return "", "", nil
	}
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	var cfg dockerConfigFile
	if err := json.Unmarshal(b, &cfg); err != nil {
		// json's syntax errors quote no input; the file may hold secrets.
		return "", "", fmt.Errorf("%s: not valid JSON", path)
	}
	if h, ok := cfg.CredHelpers[reg]; ok {
		note = fmt.Sprintf("%s names the credential helper docker-credential-%s for %s, which corral does not run: put an auths entry there instead", path, h, reg)
	} else if cfg.CredsStore != "" {
		note = fmt.Sprintf("%s names the credential store docker-credential-%s, which corral does not run: put an auths entry there instead", path, cfg.CredsStore)
	}
	var entry *dockerAuth
	for _, k := range authKeys(reg) {
		for key, a := range cfg.Auths {
			if key == k || hostOfKey(key) == k {
				entry = &a
				break
			}
		}
		if entry != nil {
			break
		}
	}
	if entry == nil {
		return "", note, nil
	}
	ac := registry.AuthConfig{ServerAddress: reg, Username: entry.Username, Password: entry.Password,
		IdentityToken: entry.IdentityToken, RegistryToken: entry.RegistryToken}
	if entry.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(entry.Auth))
		if err != nil {
			return "", note, fmt.Errorf("%s: the auths entry for %s is not base64", path, reg)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return "", note, fmt.Errorf("%s: the auths entry for %s is not user:password", path, reg)
		}
		ac.Username, ac.Password = user, pass
	}
	if ac.IdentityToken != "" {
		ac.Password = ""
	}
	if ac.Username == "" && ac.Password == "" && ac.IdentityToken == "" && ac.RegistryToken == "" {
		return "", note, nil
	}
	j, err := json.Marshal(ac)
	if err != nil {
		return "", note, err
	}
	return base64.URLEncoding.EncodeToString(j), note, nil
}
