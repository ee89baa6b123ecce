package store

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"
)

// A checkpoint is a portable snapshot of a thread: the files of its
// workspace, chosen by include/exclude rules and kept as content-addressed
// blobs, and its conversation, kept as one more blob. Unlike a provider's
// native snapshot it lives in corral's own storage, so a thread comes back
// on any provider after its sandbox and every native snapshot are gone.
//
// The checkpoints of a thread form a chain: each names its parent, and the
// thread's head is the newest published one. Publishing is fenced by a
// writer lease per thread, so two hosts never publish conflicting heads.

// CheckpointReason says why a checkpoint was taken.
type CheckpointReason string

// The checkpoint reasons.
const (
	// CheckpointAutomatic: taken by corral after a run finished.
	CheckpointAutomatic CheckpointReason = "automatic"
	// CheckpointNamed: saved on request (CLI, API or an agent tool), with a
	// label.
	CheckpointNamed CheckpointReason = "named"
	// CheckpointForkRoot: the first checkpoint of a thread forked from
	// another thread's checkpoint.
	CheckpointForkRoot CheckpointReason = "fork-root"
	// CheckpointBeforeDestroy: taken by the reaper before it destroyed an
	// idle sandbox, so its thread can come back.
	CheckpointBeforeDestroy CheckpointReason = "before-destroy"
)

// Valid reports whether r is one of the reasons above.
func (r CheckpointReason) Valid() bool {
	switch r {
	case CheckpointAutomatic, CheckpointNamed, CheckpointForkRoot, CheckpointBeforeDestroy:
		return true
	}
	return false
}

// EntryKind is the kind of a checkpoint entry.
type EntryKind string

// The entry kinds.
const (
	// EntryFile is a regular file; its bytes are the blob Entry.Blob.
	EntryFile EntryKind = "file"
	// EntryDir is a directory. Only empty directories are listed: the
	// others are implied by the entries under them.
	EntryDir EntryKind = "dir"
	// EntrySymlink is a symbolic link whose target (Entry.Target) is a
	// relative path that stays inside the workspace.
	EntrySymlink EntryKind = "symlink"
)

// Entry is one path of a checkpoint's workspace.
type Entry struct {
	// Path is relative to the workspace root, with "/" separators, no
	// leading "/", no empty, "." or ".." segment.
	Path string `json:"path"`
	// Kind is file, dir or symlink.
	Kind EntryKind `json:"kind"`
	// Blob is the lowercase hex SHA-256 of the file's bytes (after secret
	// redaction); files only.
	Blob string `json:"blob,omitempty"`
	// Size is the file's length in bytes; files only.
	Size int64 `json:"size,omitempty"`
	// Mode holds the file's permission bits as captured, limited to 0644 or
	// 0755 (executable or not); 0 means 0644. Files only: a dir or symlink
	// carries no Blob, Size or Mode.
	Mode uint32 `json:"mode,omitempty"`
	// Target is a symlink's target; symlinks only.
	Target string `json:"target,omitempty"`
}

// Checkpoint is one published portable snapshot of a thread.
type Checkpoint struct {
	// ID identifies the checkpoint; unique within its thread. Required.
	ID string `json:"id"`
	// ThreadID is the thread the checkpoint belongs to. Required.
	ThreadID string `json:"threadId"`
	// Tenant scopes the thread; optional.
	Tenant string `json:"tenant,omitempty"`
	// Parent is the checkpoint this one follows, or "" for a thread's first
	// (and for a fork root).
	Parent string `json:"parent,omitempty"`
	// CreatedAt is when it was taken. AppendCheckpoint defaults it to now.
	CreatedAt time.Time `json:"createdAt"`
	// Reason says why it was taken. Required.
	Reason CheckpointReason `json:"reason"`
	// Label names it (named checkpoints); optional.
	Label string `json:"label,omitempty"`
	// SourceRunID is the run after which it was taken; optional.
	SourceRunID string `json:"sourceRunId,omitempty"`
	// SourceThreadID and SourceCheckpointID name what a fork root was forked
	// from; empty otherwise.
	SourceThreadID     string `json:"sourceThreadId,omitempty"`
	SourceCheckpointID string `json:"sourceCheckpointId,omitempty"`
	// Entries are the workspace's paths, sorted by path bytes, each path
	// once.
	Entries []Entry `json:"entries"`
	// Conversation is the digest of the blob holding the thread's
	// conversation (its runs and their events, as JSON), or "" when the
	// retention mode keeps none.
	Conversation string `json:"conversation,omitempty"`
	// Bytes is the sum of the file entries' sizes.
	Bytes int64 `json:"bytes"`
}

// Blobs returns the distinct blob digests the checkpoint references: its
// files' and its conversation's, sorted.
func (c Checkpoint) Blobs() []string {
	seen := map[string]bool{}
	var out []string
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, e := range c.Entries {
		add(e.Blob)
	}
	add(c.Conversation)
	slices.Sort(out)
	return out
}

// WriterLease is the right to publish checkpoints for one thread. It expires
// unless renewed (by the store's clock, compared in milliseconds); an expired lease can be taken over by another writer, and
// the store then refuses every write of the old one (its Fence is lower).
type WriterLease struct {
	// Tenant and ThreadID name the thread.
	Tenant   string `json:"tenant,omitempty"`
	ThreadID string `json:"threadId"`
	// Token is a random owner token, unique per acquisition.
	Token string `json:"token"`
	// Fence grows with every acquisition of the thread's lease.
	Fence int64 `json:"fence"`
	// ExpiresAt is when the lease ends unless renewed.
	ExpiresAt time.Time `json:"expiresAt"`
	// SweepGen is the blob sweep generation the store had when the lease
	// was acquired (see BlobSweep); renewing keeps it.
	SweepGen int64 `json:"sweepGen,omitempty"`
}

// BlobSweep is the right to delete unreferenced blobs, one holder at a time
// per store. The store keeps a sweep generation that is even while no sweep
// runs and odd while one does: BeginBlobSweep and EndBlobSweep each move it
// on by one. A capture never deletes and a sweep never publishes, so they
// meet only through the generation: AppendCheckpoint refuses (ErrBlobSwept)
// a lease acquired under another generation than the current one, or under
// a sweep that is still live. Every blob-existence check a capture makes
// comes after it acquired its lease, so a capture that published had no
// sweep start or run between its first check and its publish, and a sweep
// reads the references after its begin, so it sees every checkpoint
// published before it. A swept capture retries: its blobs are checked and
// put again.
type BlobSweep struct {
	// Gen is the generation the sweep holds (odd).
	Gen int64 `json:"gen"`
	// ExpiresAt is when the sweep ends by itself: its holder deletes
	// nothing after it (it stops short of it), and another sweep may begin.
	ExpiresAt time.Time `json:"expiresAt"`
}

// BlobRef is a blob digest and how many published checkpoints reference it.
type BlobRef struct {
	Digest     string `json:"digest"`
	References int    `json:"references"`
}

// The conditions a checkpoint store reports beyond the plain codes. A store
// returns a *sandbox.Error with code FailedPrecondition (or NotFound for
// ErrForkSourceNotFound) whose cause is one of these, so both
// errors.Is(err, sandbox.FailedPrecondition) and errors.Is(err,
// ErrStaleHead) hold.
var (
	// ErrWriterConflict: another writer holds a live lease on the thread.
	ErrWriterConflict = errors.New("another writer holds the thread")
	// ErrWriterLost: the lease presented is expired, released or superseded.
	ErrWriterLost = errors.New("writer lease lost")
	// ErrStaleHead: the thread's head is not the one the writer expected.
	ErrStaleHead = errors.New("stale head")
	// ErrParentMismatch: the checkpoint's parent is not the expected head.
	ErrParentMismatch = errors.New("parent is not the expected head")
	// ErrNotHead: the checkpoint to delete is not the thread's head.
	ErrNotHead = errors.New("not the head")
	// ErrForkDestinationNotEmpty: a fork's destination thread already has
	// checkpoints, runs or a head.
	ErrForkDestinationNotEmpty = errors.New("fork destination is not empty")
	// ErrForkSourceNotFound: the checkpoint to fork from does not exist.
	ErrForkSourceNotFound = errors.New("fork source not found")
	// ErrBlobSwept: a blob sweep began or ran since the writer lease was
	// acquired; the blobs the capture found may be gone, so it must check
	// them again under a new lease.
	ErrBlobSwept = errors.New("blobs were swept during the capture")
	// ErrSweepConflict: another blob sweep is live.
	ErrSweepConflict = errors.New("another blob sweep is live")
	// ErrBlobDigest: a blob's bytes do not hash to its digest, or a digest
	// is malformed.
	ErrBlobDigest = errors.New("blob digest mismatch")
)

// CheckpointStore keeps the checkpoints of threads, their heads and their
// writer leases. Reads return copies. Every write that publishes is fenced
// by a WriterLease, checked in the same transaction as the write.
type CheckpointStore interface {
	// AcquireWriter takes the thread's writer lease for ttl without waiting:
	// a live lease held by someone else is ErrWriterConflict. An expired one
	// is taken over with a greater Fence.
	AcquireWriter(ctx context.Context, tenant, threadID string, ttl time.Duration) (WriterLease, error)
	// RenewWriter extends w by ttl from now and returns the renewed lease;
	// ErrWriterLost if w is no longer current.
	RenewWriter(ctx context.Context, w WriterLease, ttl time.Duration) (WriterLease, error)
	// ReleaseWriter gives w up if it is still current; otherwise it does
	// nothing and returns nil.
	ReleaseWriter(ctx context.Context, w WriterLease) error

	// AppendCheckpoint publishes cp as its thread's new head, if w is the
	// thread's current lease (else ErrWriterLost), the head is expectedHead
	// ("" = no head; else ErrStaleHead) and cp.Parent equals expectedHead
	// (else ErrParentMismatch) and no blob sweep began since w was acquired
	// (else ErrBlobSwept, see BlobSweep). An existing id is AlreadyExists; a malformed
	// checkpoint (paths, kinds, digests, sizes, reason) is InvalidArgument.
	// Every blob it references must already be in the blob store the caller
	// uses; the store counts one reference per distinct digest. The stored
	// (and returned) checkpoint has its entries sorted by path bytes, Bytes
	// set to the sum of the files' sizes and CreatedAt in milliseconds, UTC.
	AppendCheckpoint(ctx context.Context, cp Checkpoint, expectedHead string, w WriterLease) (Checkpoint, error)
	// GetCheckpoint returns one checkpoint of the thread; NotFound if absent.
	GetCheckpoint(ctx context.Context, tenant, threadID, id string) (Checkpoint, error)
	// ListCheckpoints returns the thread's checkpoints ordered by
	// (CreatedAt, ID bytes), oldest first.
	ListCheckpoints(ctx context.Context, tenant, threadID string) ([]Checkpoint, error)
	// Head returns the id of the thread's head checkpoint and whether it has
	// one.
	Head(ctx context.Context, tenant, threadID string) (string, bool, error)
	// DeleteHead removes the thread's head checkpoint id (else ErrNotHead)
	// under w; the head moves to its parent, or is cleared when the parent
	// is "" or no longer stored.
	DeleteHead(ctx context.Context, tenant, threadID, id string, w WriterLease) error
	// PruneCheckpoints deletes the thread's checkpoints that are neither the
	// head nor among the keep newest (0 = no count rule; negative is
	// InvalidArgument), and those created before olderThan (zero = no age
	// rule) unless it is the head, under w. With neither rule it deletes
	// nothing; keep 1 keeps the head and the newest. Children of a
	// deleted checkpoint keep their Parent id (a dangling parent is allowed).
	// It returns the number deleted.
	PruneCheckpoints(ctx context.Context, tenant, threadID string, keep int, olderThan time.Time, w WriterLease) (int, error)
	// ForkCheckpoint makes, in one step, a new thread dstThreadID (in the
	// same tenant) whose only checkpoint dstID is a fork root copying the
	// source's entries and conversation, and sets it as the destination's
	// head. w must be the destination's current lease. The destination must
	// be empty: no checkpoints, no head and no runs (ErrForkDestinationNotEmpty);
	// the source must exist (ErrForkSourceNotFound) and the threads differ
	// (InvalidArgument).
	ForkCheckpoint(ctx context.Context, tenant, srcThreadID, srcID, dstThreadID, dstID string, createdAt time.Time, w WriterLease) (Checkpoint, error)
	// BlobReferences returns every digest referenced by a published
	// checkpoint with its count, sorted by digest.
	BlobReferences(ctx context.Context) ([]BlobRef, error)
	// BeginBlobSweep starts a blob sweep lasting ttl (see BlobSweep): the
	// generation becomes odd. A live sweep is ErrSweepConflict; an expired
	// one is taken over.
	BeginBlobSweep(ctx context.Context, ttl time.Duration) (BlobSweep, error)
	// EndBlobSweep ends sw if it is still the current sweep (the generation
	// becomes even); otherwise it does nothing and returns nil.
	EndBlobSweep(ctx context.Context, sw BlobSweep) error
	// ListCheckpointThreads returns every thread that has a checkpoint,
	// ordered by tenant then thread id.
	ListCheckpointThreads(ctx context.Context) ([]ThreadRef, error)
}

// ThreadRef names a thread within its tenant.
type ThreadRef struct {
	Tenant   string `json:"tenant,omitempty"`
	ThreadID string `json:"threadId"`
}

// BlobStore keeps content-addressed blobs: each blob is stored under the
// lowercase hex SHA-256 of its bytes, once, however many checkpoints share
// it.
type BlobStore interface {
	// PutBlob stores data under digest. size is the number of bytes data
	// holds, or negative when unknown. The store verifies the digest and a
	// known size (ErrBlobDigest, InvalidArgument) and stores nothing when
	// they do not match; putting a blob it has is a no-op (the bytes are
	// still verified).
	PutBlob(ctx context.Context, digest string, data io.Reader, size int64) error
	// HasBlob reports whether the blob is stored.
	HasBlob(ctx context.Context, digest string) (bool, error)
	// OpenBlob returns the blob's bytes; NotFound if absent. The caller
	// closes it and verifies the digest if it does not trust the store.
	OpenBlob(ctx context.Context, digest string) (io.ReadCloser, error)
	// DeleteBlob removes the blob; deleting an absent blob is not an error.
	DeleteBlob(ctx context.Context, digest string) error
	// ListBlobs returns up to limit digests (0 = a default page of 1000) in
	// ascending order after the opaque cursor ("" = from the start), and the
	// cursor for the next page ("" when there is none). A page may hold
	// fewer than limit digests, even none, and still have a next cursor; a
	// malformed cursor is InvalidArgument.
	ListBlobs(ctx context.Context, cursor string, limit int) ([]string, string, error)
}
