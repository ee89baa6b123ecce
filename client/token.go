package client

import (
	"errors"
	"io/fs"
	"net"
	"net/url"
	"os"

	"github.com/d10ffeed/corral/api"
)

// ResolveToken finds the token for the daemon at baseURL: explicit when it
// is set, else $CORRAL_TOKEN, else — when baseURL is on loopback — the
// token a local `corral serve` keeps in the state directory
// (api.TokenPath). It returns "" when there is none (a daemon started
// with --no-auth needs none).
func ResolveToken(baseURL, explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env := os.Getenv("CORRAL_TOKEN"); env != "" {
		return env, nil
	}
	if !IsLoopback(baseURL) {
		return "", nil
	}
	path, err := api.TokenPath()
	if err != nil {
		return "", nil // no state directory: no token kept either
	}
	tok, err := api.ReadToken(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// IsLoopback reports whether an http(s) URL names this machine's loopback
// (localhost, 127.0.0.0/8, ::1).
func IsLoopback(baseURL string) bool {
	u, err := url.Parse(baseURL)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
