// Package mcpstub is a stdio MCP server for tests of the harnesses'
// workspace projection: a real agent CLI given the server lists its one
// tool to the model, and the tool's description carries a digest of the
// secret the server found in its environment.
package mcpstub

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

//go:embed mcpstub.js
var script []byte

// TokenEnv is the environment variable whose value the server digests.
const TokenEnv = "CORRAL_PROBE_TOKEN"

// Write puts the server's script in a temporary directory and returns its
// path; run it as `node PATH NAME`.
func Write(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "mcpstub.js")
	if err := os.WriteFile(p, script, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// ToolName is the name of the tool a server started as `node PATH name`
// offers (agents usually prefix it with the server's name).
func ToolName(name string) string { return "probe_" + name }

// Digest is what the tool's description carries for a token: the first 16
// hex digits of its SHA-256, or "none" for no token.
func Digest(token string) string {
	if token == "" {
		return "none"
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])[:16]
}
