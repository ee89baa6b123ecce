package docker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
)

// Labels corral puts on its containers and snapshot images. Reaping and
// listing select by them, so containers made outside corral are never
// touched.
const (
	// LabelManaged is "true" on every container and image corral makes.
	LabelManaged = "dev.corral.managed"
	// LabelSandboxID is the sandbox id (the container name).
	LabelSandboxID = "dev.corral.sandbox-id"
	// LabelKey is CreateOptions.ID as given, when it was set.
	LabelKey = "dev.corral.key"
	// LabelCreatedAt is when corral created the container or image
	// (RFC 3339, UTC).
	LabelCreatedAt = "dev.corral.created-at"
	// LabelUser is Options.User of the provider that made the container:
	// the user its commands run as.
	LabelUser = "dev.corral.user"
	// LabelFrom is the snapshot image a restored or forked container was
	// made from.
	LabelFrom = "dev.corral.from"
	// LabelForkOf is the sandbox a fork was made from.
	LabelForkOf = "dev.corral.fork-of"
	// LabelSnapshot is "snapshot" on images made by Handle.Snapshot and
	// "fork" on the intermediate images of Handle.Fork.
	LabelSnapshot = "dev.corral.snapshot"
	// LabelSnapshotOf is the sandbox a snapshot image was taken from.
	LabelSnapshotOf = "dev.corral.snapshot-of"
	// LabelSnapshotLabel is the label given to Handle.Snapshot.
	LabelSnapshotLabel = "dev.corral.snapshot-label"
)

// validName is Docker's rule for container names (Docker sets no length
// limit; corral keeps names short enough to reuse in image tags).
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{1,127}$`)

// containerName returns the container name for a requested sandbox id:
// the id itself when Docker accepts it as a name, otherwise a readable
// prefix of it plus a digest of the whole id (the id itself is kept in
// LabelKey).
func containerName(id string) string {
	if validName.MatchString(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "corral-" + sanitize(id, 40) + hex.EncodeToString(sum[:6])
}

// sanitize keeps the characters Docker allows in names and tags, turns
// runs of others into one '-', and cuts the result to at most n bytes
// ending in '-' (or returns "" when nothing is left).
func sanitize(s string, n int) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s) && b.Len() < n; i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' {
			b.WriteByte(c)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	out := strings.TrimRight(b.String(), "-.")
	if out == "" {
		return ""
	}
	return out + "-"
}

// newName returns a fresh random container name.
func newName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "corral-" + hex.EncodeToString(b[:])
}
