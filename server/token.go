package server

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/d10ffeed/corral/api"
)

// NewToken returns a fresh bearer token: 192 random bits, hex-encoded.
func NewToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// LoadOrCreateToken returns the token kept in path, making one on first use:
// the directory is created owner-only (0700), the file is owner-only (0600)
// and appears whole or not at all, so daemons started at the same time
// agree on one token. created reports whether this call made it. A file
// that others can read is refused (see api.ReadToken).
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	tok, err := api.ReadToken(path)
	if err == nil {
		return tok, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", false, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", false, fmt.Errorf("creating the state directory: %w", err)
	}
	if tok, err = NewToken(); err != nil {
		return "", false, err
	}
	tmp, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return "", false, fmt.Errorf("writing the token file: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600; say so anyway, whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", false, err
	}
	if _, err := tmp.WriteString(tok + "\n"); err != nil {
		tmp.Close()
		return "", false, fmt.Errorf("writing the token file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", false, err
	}
	if err := tmp.Close(); err != nil {
		return "", false, err
	}
	// A hard link fails if the name exists: a daemon that got there first
	// wins, and everyone reads its token.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			tok, err := api.ReadToken(path)
			return tok, false, err
		}
		return "", false, fmt.Errorf("writing the token file: %w", err)
	}
	return tok, true, nil
}
