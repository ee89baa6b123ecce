package kubernetes

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Labels and annotations corral puts on its Pods. Listing, Resume by key
// and pruning select by them, so Pods made outside corral are never
// touched.
const (
	// LabelManaged is "true" on every Pod corral makes.
	LabelManaged = "corral.dev/managed"
	// LabelSandboxID is the sandbox id (the Pod's name).
	LabelSandboxID = "corral.dev/sandbox-id"
	// LabelKeyHash is a digest of CreateOptions.ID (a label value cannot
	// hold every key); Resume by key selects on it.
	LabelKeyHash = "corral.dev/key-hash"
	// AnnotationKey is CreateOptions.ID as given.
	AnnotationKey = "corral.dev/key"
	// AnnotationCreatedAt is when corral created the Pod (RFC 3339, UTC).
	AnnotationCreatedAt = "corral.dev/created-at"
)

// containerName is the name of the sandbox's one container.
const containerName = "sandbox"

// validPodName is a DNS-1123 label: a Pod name that is also a valid
// hostname.
var validPodName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// podName returns the Pod name for a requested sandbox id: the id itself
// when it is a valid DNS-1123 label, otherwise "corral-", a readable
// lower-case prefix of it and a digest of the whole id.
func podName(id string) string {
	if validPodName.MatchString(id) {
		return id
	}
	return "corral-" + sanitize(id, 36) + keyHash(id)[:12]
}

// keyHash is the label value that stands for a key: 40 hex digits of its
// SHA-256.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:20])
}

// sanitize lower-cases s, keeps [a-z0-9], turns runs of anything else into
// one '-', and cuts the result to at most n bytes ending in '-' (or returns
// "" when nothing is left).
func sanitize(s string, n int) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s) && b.Len() < n; i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			b.WriteByte(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		return ""
	}
	return out + "-"
}

// newName returns a fresh random Pod name.
func newName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "corral-" + hex.EncodeToString(b[:])
}
