package gateway

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Placeholders are derived, not stored: a placeholder is
//
//	corral-ph1.<base64url run id>.<secret name>.<base64url MAC>
//
// where MAC is HMAC-SHA256 under the gateway key over the run id, the run's
// journal nonce (random per run, kept in the run record), the run's
// sandbox key and the secret name. Any gateway process holding the same
// key and reading the same store can check one (replicas, a restarted
// daemon), and nothing is written per run. A placeholder is bound to its
// run and sandbox by the MAC; it is revoked when its run ends because the
// gateway honours it only while the run record is not terminal.
const tokenPrefix = "corral-ph1."

// KeySize is the size of a gateway key in bytes.
const KeySize = 32

// NewKey returns a random gateway key.
func NewKey() []byte {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k)
	return k
}

// LoadOrCreateKey reads the gateway key kept at path, or makes one and
// keeps it there (mode 0600) when the file does not exist. Replicas that
// serve the same runs must share the file's content.
func LoadOrCreateKey(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil {
		k, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) < 16 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "gateway.key", path, "not a gateway key (base64url, at least 16 bytes)")
		}
		return k, nil
	} else if !os.IsNotExist(err) {
		return nil, sandbox.Wrap(sandbox.Internal, "gateway.key", path, err)
	}
	k := NewKey()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "gateway.key", path, err)
	}
	if err := os.WriteFile(path, []byte(base64.RawURLEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "gateway.key", path, err)
	}
	return k, nil
}

func mac(key []byte, run store.Run, name string) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"corral-ph1", run.ID, run.JournalNonce, run.SandboxKey, name} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)[:24]
}

// placeholder is the run's placeholder for the named secret.
func placeholder(key []byte, run store.Run, name string) string {
	return tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(run.ID)) + "." + name + "." + base64.RawURLEncoding.EncodeToString(mac(key, run, name))
}

// parsed is a placeholder's readable parts (not yet checked).
type parsed struct {
	token, runID, name string
	mac                []byte
}

// findTokens returns the placeholders in s, in order.
func findTokens(s string) []parsed {
	var out []parsed
	for {
		i := strings.Index(s, tokenPrefix)
		if i < 0 {
			return out
		}
		s = s[i:]
		end := len(tokenPrefix)
		for end < len(s) && tokenByte(s[end]) {
			end++
		}
		tok := s[:end]
		s = s[end:]
		parts := strings.Split(strings.TrimPrefix(tok, tokenPrefix), ".")
		if len(parts) != 3 {
			continue
		}
		id, err1 := base64.RawURLEncoding.DecodeString(parts[0])
		m, err2 := base64.RawURLEncoding.DecodeString(parts[2])
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, parsed{token: tok, runID: string(id), name: parts[1], mac: m})
	}
}

func tokenByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
