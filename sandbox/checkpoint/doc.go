// Package checkpoint captures a sandbox workspace as a portable checkpoint
// (store.Entry values and content-addressed blobs in a store.BlobStore) and
// restores one into any sandbox's file system. It reaches the workspace only
// through sandbox.FS (and the optional sandbox.LinkFS and sandbox.ModeFS),
// so it works on every provider.
//
// What a checkpoint keeps:
//
//   - Regular files, with their bytes after secret redaction and their mode
//     reduced to 0644 or 0755 (any execute bit makes 0755).
//   - Empty directories (the others are implied by the entries under them).
//   - Symbolic links whose target passes sandbox.CheckLinkTarget: relative,
//     in clean form, and inside the workspace from the link's directory.
//     Absolute or escaping links are skipped and reported, not fatal; on an
//     FS without sandbox.LinkFS every link is skipped and reported.
//   - Nothing else: sockets, FIFOs and devices are skipped and reported, as
//     are names that are not valid UTF-8 and paths holding a secret value.
//
// Rules choose the paths (see Rules): by default every ".git" and
// "node_modules" segment, every segment starting with ".env", and the agent
// files corral projected into the workspace root (ProjectedFiles) are left
// out. Left-out paths are protected on restore: they are never written nor
// removed.
//
// Restore (see Restore) validates a whole manifest, then every blob, then
// plans against the destination before it changes anything.
package checkpoint
