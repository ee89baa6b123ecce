package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// KeyInput is what identifies a sandbox instance: the same input always
// yields the same key, and any change yields another.
type KeyInput struct {
	Thread        string `json:"thread,omitempty"`
	Definition    string `json:"definition,omitempty"`
	Provider      string `json:"provider,omitempty"`
	WorkspaceHash string `json:"workspace,omitempty"`
	Tenant        string `json:"tenant,omitempty"`
}

// Key returns the sandbox key: the first 32 hex digits (128 bits) of the
// SHA-256 of the input's canonical encoding (see Canonical). Absent (empty)
// fields are absent from the encoding, so a missing tenant and an empty one
// are the same key. The key is the provider's create id, the lock name and
// the instance-store key.
func Key(in KeyInput) string {
	sum := sha256.Sum256(Canonical(in))
	return hex.EncodeToString(sum[:16])
}

// Canonical returns the canonical encoding of v, the input of every digest
// corral takes: JSON with object keys sorted bytewise, no insignificant
// white space, no HTML escaping, empty optional fields left out (every
// hashed type tags them omitempty), and numbers as written. It panics on a
// value encoding/json cannot encode, which is a programming error for the
// fixed types hashed here.
func Canonical(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		panic("sandbox.Canonical: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		panic("sandbox.Canonical: " + err.Error())
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil { // maps encode with sorted keys
		panic("sandbox.Canonical: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Digest returns the hex SHA-256 of the canonical encoding of v.
func Digest(v any) string {
	sum := sha256.Sum256(Canonical(v))
	return hex.EncodeToString(sum[:])
}
