package api

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// TokenFileName is the name of the daemon's token file in the state
// directory: `corral serve` writes it on its first start (when no tokens
// are configured) and clients on the same machine read it.
const TokenFileName = "daemon.token"

// StateDir is where corral keeps its state on this machine (the default
// SQLite store, the daemon's token): $XDG_STATE_HOME/corral, else
// ~/.local/state/corral.
func StateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "corral"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no home directory for corral's state (set XDG_STATE_HOME): %w", err)
	}
	return filepath.Join(home, ".local", "state", "corral"), nil
}

// TokenPath is the path of the daemon's token file in the state directory.
func TokenPath() (string, error) {
	dir, err := StateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, TokenFileName), nil
}

// ReadToken reads a token file. It refuses a file that other users may
// read or write (the token lets its holder run commands as the daemon's
// user) and an empty one. A missing file is an error satisfying
// errors.Is(err, fs.ErrNotExist).
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("token file %s has mode %04o: others may read it; remove it (a new token is made on the next start) or chmod 600 it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("reading token file %s: %w", path, err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("token file %s does not hold one token: remove it and restart the daemon to make a new one", path)
	}
	return tok, nil
}
