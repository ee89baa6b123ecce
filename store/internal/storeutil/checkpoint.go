package storeutil

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Operation names of the checkpoint and blob stores.
const (
	OpAcquireWriter    = "checkpoints.acquire_writer"
	OpRenewWriter      = "checkpoints.renew_writer"
	OpReleaseWriter    = "checkpoints.release_writer"
	OpAppendCheckpoint = "checkpoints.append"
	OpGetCheckpoint    = "checkpoints.get"
	OpListCheckpoints  = "checkpoints.list"
	OpHead             = "checkpoints.head"
	OpDeleteHead       = "checkpoints.delete_head"
	OpPrune            = "checkpoints.prune"
	OpFork             = "checkpoints.fork"
	OpBlobReferences   = "checkpoints.blob_references"
	OpPutBlob          = "blobs.put"
	OpHasBlob          = "blobs.has"
	OpOpenBlob         = "blobs.open"
	OpDeleteBlob       = "blobs.delete"
	OpListBlobs        = "blobs.list"
)

// DefaultBlobPage is the page size of ListBlobs when the limit is 0.
const DefaultBlobPage = 1000

// Cond is a checkpoint-store condition: a *sandbox.Error with code and the
// store.Err… sentinel cause as its cause, so errors.Is holds for both.
func Cond(code sandbox.Code, cause error, op, id, format string, args ...any) error {
	e := sandbox.Errorf(code, op, id, format, args...).(*sandbox.Error)
	e.Err = cause
	return e
}

// WriterLost is the error for a lease that is no longer current.
func WriterLost(op, thread string) error {
	return Cond(sandbox.FailedPrecondition, store.ErrWriterLost, op, thread,
		"the writer lease is expired, released or superseded")
}

// CheckpointNotFound is the error for a missing checkpoint.
func CheckpointNotFound(op, thread, id string) error {
	return sandbox.Errorf(sandbox.NotFound, op, thread+"/"+id, "no such checkpoint")
}

// BlobNotFound is the error for a missing blob.
func BlobNotFound(op, digest string) error {
	return sandbox.Errorf(sandbox.NotFound, op, digest, "no such blob")
}

// ValidID reports whether s is a usable id: non-empty, valid UTF-8, no NUL.
func ValidID(s string) bool {
	return s != "" && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// ValidateThread checks a tenant (may be empty) and a thread id.
func ValidateThread(op, tenant, thread string) error {
	if !ValidID(thread) {
		return sandbox.Errorf(sandbox.InvalidArgument, op, thread, "thread id must be non-empty valid UTF-8 without NUL")
	}
	if !utf8.ValidString(tenant) || strings.ContainsRune(tenant, 0) {
		return sandbox.Errorf(sandbox.InvalidArgument, op, thread, "tenant must be valid UTF-8 without NUL")
	}
	return nil
}

// ValidateCheckpointID checks a thread and one of its checkpoint ids.
func ValidateCheckpointID(op, tenant, thread, id string) error {
	if err := ValidateThread(op, tenant, thread); err != nil {
		return err
	}
	if !ValidID(id) {
		return sandbox.Errorf(sandbox.InvalidArgument, op, thread, "checkpoint id must be non-empty valid UTF-8 without NUL")
	}
	return nil
}

// ValidDigest reports whether d is 64 lowercase hex digits.
func ValidDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ValidateDigest refuses a malformed digest (InvalidArgument, ErrBlobDigest).
func ValidateDigest(op, d string) error {
	if !ValidDigest(d) {
		return Cond(sandbox.InvalidArgument, store.ErrBlobDigest, op, d, "digest is not 64 lowercase hex digits")
	}
	return nil
}

// ValidateWriterArgs checks AcquireWriter's and RenewWriter's arguments.
func ValidateWriterArgs(op, tenant, thread string, ttl time.Duration) error {
	if err := ValidateThread(op, tenant, thread); err != nil {
		return err
	}
	if ttl < time.Millisecond {
		return sandbox.Errorf(sandbox.InvalidArgument, op, thread, "lease ttl %v is below 1ms", ttl)
	}
	return nil
}

// NewWriterToken returns a random owner token (128 bits, hex).
func NewWriterToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// WriterRow is a thread's stored writer lease; Expires is zero after a
// release.
type WriterRow struct {
	Token   string
	Fence   int64
	Expires time.Time
}

// Live reports whether the row holds an unexpired lease at now (compared
// in whole milliseconds, as the SQL stores compare).
func (r WriterRow) Live(now time.Time) bool {
	return !r.Expires.IsZero() && MS(r.Expires) > MS(now)
}

// LeaseExpiry is when a lease taken or renewed at now for ttl ends.
func LeaseExpiry(now time.Time, ttl time.Duration) time.Time {
	return FromMS(MS(now) + TTLMillis(ttl))
}

// WriterConflict is the error for a thread whose lease another writer holds.
func WriterConflict(op, thread string) error {
	return Cond(sandbox.FailedPrecondition, store.ErrWriterConflict, op, thread,
		"another writer holds the thread's lease")
}

// CheckWriter reports whether w is the current lease of the row at now:
// same token and fence, unexpired. found says whether a row exists.
func CheckWriter(op string, row WriterRow, found bool, w store.WriterLease, now time.Time) error {
	if !found || row.Token != w.Token || row.Fence != w.Fence || !row.Live(now) {
		return WriterLost(op, w.ThreadID)
	}
	return nil
}

// CheckLeaseThread refuses a lease for another thread than the operation's.
func CheckLeaseThread(op, tenant, thread string, w store.WriterLease) error {
	if w.Tenant != tenant || w.ThreadID != thread {
		return Cond(sandbox.FailedPrecondition, store.ErrWriterLost, op, thread,
			"the writer lease is for thread %q (tenant %q), not this one", w.ThreadID, w.Tenant)
	}
	return nil
}

// NormalizeCheckpoint validates cp for AppendCheckpoint and returns the form
// the store keeps: a deep copy with entries sorted by path bytes, CreatedAt
// defaulted to now and truncated to milliseconds, Bytes the sum of the
// files' sizes. Any flaw is InvalidArgument.
func NormalizeCheckpoint(op string, cp store.Checkpoint, now time.Time) (store.Checkpoint, error) {
	fail := func(format string, args ...any) (store.Checkpoint, error) {
		return store.Checkpoint{}, sandbox.Errorf(sandbox.InvalidArgument, op, cp.ThreadID+"/"+cp.ID, format, args...)
	}
	if err := ValidateCheckpointID(op, cp.Tenant, cp.ThreadID, cp.ID); err != nil {
		return store.Checkpoint{}, err
	}
	if !cp.Reason.Valid() {
		return fail("invalid checkpoint reason %q", cp.Reason)
	}
	for _, f := range []struct{ name, v string }{
		{"Parent", cp.Parent}, {"Label", cp.Label}, {"SourceRunID", cp.SourceRunID},
		{"SourceThreadID", cp.SourceThreadID}, {"SourceCheckpointID", cp.SourceCheckpointID},
	} {
		if !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0) {
			return fail("%s must be valid UTF-8 without NUL", f.name)
		}
	}
	if cp.Parent == cp.ID {
		return fail("a checkpoint cannot be its own parent")
	}
	if cp.Conversation != "" && !ValidDigest(cp.Conversation) {
		return fail("conversation digest is not 64 lowercase hex digits")
	}
	if cp.CreatedAt.IsZero() {
		cp.CreatedAt = now
	}
	if y := cp.CreatedAt.Year(); y < 1970 || y > 9999 {
		return fail("CreatedAt %v is out of range", cp.CreatedAt)
	}
	cp.CreatedAt = store.Millis(cp.CreatedAt)
	entries := slices.Clone(cp.Entries)
	slices.SortFunc(entries, func(a, b store.Entry) int { return strings.Compare(a.Path, b.Path) })
	files := map[string]bool{}
	var total int64
	for i, e := range entries {
		if err := checkEntry(e); err != "" {
			return fail("entry %q: %s", e.Path, err)
		}
		if i > 0 && entries[i-1].Path == e.Path {
			return fail("entry %q is listed twice", e.Path)
		}
		if e.Kind == store.EntryFile {
			files[e.Path] = true
			if total+e.Size < total {
				return fail("the files' sizes overflow")
			}
			total += e.Size
		}
	}
	for _, e := range entries {
		for p := path.Dir(e.Path); p != "."; p = path.Dir(p) {
			if files[p] {
				return fail("entry %q is under the file %q", e.Path, p)
			}
		}
	}
	if entries == nil {
		entries = []store.Entry{}
	}
	cp.Entries = entries
	cp.Bytes = total
	return cp, nil
}

// checkEntry returns what is wrong with e, or "".
func checkEntry(e store.Entry) string {
	if msg := checkPath(e.Path); msg != "" {
		return msg
	}
	switch e.Kind {
	case store.EntryFile:
		if !ValidDigest(e.Blob) {
			return "file blob is not 64 lowercase hex digits"
		}
		if e.Size < 0 {
			return "file size is negative"
		}
		if e.Mode != 0 && e.Mode != 0o644 && e.Mode != 0o755 {
			return "file mode must be 0, 0644 or 0755"
		}
		if e.Target != "" {
			return "a file has no target"
		}
	case store.EntryDir, store.EntrySymlink:
		if e.Blob != "" || e.Size != 0 || e.Mode != 0 {
			return "only files carry a blob, a size or a mode"
		}
		if e.Kind == store.EntryDir {
			if e.Target != "" {
				return "a directory has no target"
			}
			break
		}
		if e.Target == "" || !utf8.ValidString(e.Target) || strings.ContainsRune(e.Target, 0) {
			return "symlink target must be non-empty valid UTF-8 without NUL"
		}
		if strings.HasPrefix(e.Target, "/") || strings.HasPrefix(e.Target, `\`) || hasDrive(e.Target) {
			return "symlink target must be relative"
		}
		if resolved := path.Join(path.Dir(e.Path), e.Target); resolved == ".." || strings.HasPrefix(resolved, "../") {
			return "symlink target leaves the workspace"
		}
	default:
		return "invalid kind " + string(e.Kind)
	}
	return ""
}

// checkPath returns what is wrong with a workspace-relative path, or "".
func checkPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case !utf8.ValidString(p):
		return "path is not valid UTF-8"
	case strings.ContainsRune(p, 0):
		return "path contains NUL"
	case strings.HasPrefix(p, "/"), strings.HasPrefix(p, `\`), hasDrive(p):
		return "path is absolute"
	case strings.HasSuffix(p, "/"):
		return "path ends in /"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "path has an empty, . or .. segment"
		}
	}
	return ""
}

// hasDrive reports a Windows drive prefix such as "C:".
func hasDrive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && (p[0] >= 'a' && p[0] <= 'z' || p[0] >= 'A' && p[0] <= 'Z')
}

// CopyCheckpoint returns a deep copy of cp.
func CopyCheckpoint(cp store.Checkpoint) store.Checkpoint {
	cp.Entries = slices.Clone(cp.Entries)
	if cp.Entries == nil {
		cp.Entries = []store.Entry{}
	}
	return cp
}

// CompareCheckpoints orders checkpoints by (CreatedAt, ID bytes).
func CompareCheckpoints(a, b store.Checkpoint) int {
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// PruneSet returns the ids to delete among cps (ordered oldest first) by
// PruneCheckpoints' rules: keep > 0 keeps the keep newest, a non-zero
// olderThan deletes those created before it; the head is never deleted.
func PruneSet(cps []store.Checkpoint, head string, keep int, olderThan time.Time) []string {
	var out []string
	for i, cp := range cps {
		if cp.ID == head {
			continue
		}
		newest := len(cps) - i // 1 for the newest
		byCount := keep > 0 && newest > keep
		byAge := !olderThan.IsZero() && cp.CreatedAt.Before(olderThan)
		if byCount || byAge {
			out = append(out, cp.ID)
		}
	}
	return out
}

// ValidatePrune checks PruneCheckpoints' arguments.
func ValidatePrune(tenant, thread string, keep int) error {
	if err := ValidateThread(OpPrune, tenant, thread); err != nil {
		return err
	}
	if keep < 0 {
		return sandbox.Errorf(sandbox.InvalidArgument, OpPrune, thread, "keep %d is negative", keep)
	}
	return nil
}

// ValidateFork checks ForkCheckpoint's arguments.
func ValidateFork(tenant, src, srcID, dst, dstID string) error {
	if err := ValidateCheckpointID(OpFork, tenant, src, srcID); err != nil {
		return err
	}
	if err := ValidateCheckpointID(OpFork, tenant, dst, dstID); err != nil {
		return err
	}
	if src == dst {
		return sandbox.Errorf(sandbox.InvalidArgument, OpFork, dst, "a fork's destination must be another thread")
	}
	return nil
}

// ForkRoot is the fork root copying src into thread dst as dstID.
func ForkRoot(src store.Checkpoint, dst, dstID string, createdAt, now time.Time) store.Checkpoint {
	if createdAt.IsZero() {
		createdAt = now
	}
	return store.Checkpoint{
		ID: dstID, ThreadID: dst, Tenant: src.Tenant,
		CreatedAt: store.Millis(createdAt), Reason: store.CheckpointForkRoot,
		SourceThreadID: src.ThreadID, SourceCheckpointID: src.ID,
		Entries: slices.Clone(src.Entries), Conversation: src.Conversation, Bytes: src.Bytes,
	}
}

// ForkDestinationNotEmpty is the error for a fork into a used thread.
func ForkDestinationNotEmpty(dst, what string) error {
	return Cond(sandbox.FailedPrecondition, store.ErrForkDestinationNotEmpty, OpFork, dst,
		"the destination thread already has %s", what)
}

// ForkSourceNotFound is the error for a fork from a missing checkpoint.
func ForkSourceNotFound(src, srcID string) error {
	return Cond(sandbox.NotFound, store.ErrForkSourceNotFound, OpFork, src+"/"+srcID, "no such checkpoint to fork from")
}

// AppendConflicts applies AppendCheckpoint's head rules after the writer
// check: exists is whether cp's id is already stored, head the stored head.
func AppendConflicts(cp store.Checkpoint, expectedHead string, exists bool, head string) error {
	id := cp.ThreadID + "/" + cp.ID
	switch {
	case exists:
		return sandbox.Errorf(sandbox.AlreadyExists, OpAppendCheckpoint, id, "checkpoint id is already stored")
	case head != expectedHead:
		return Cond(sandbox.FailedPrecondition, store.ErrStaleHead, OpAppendCheckpoint, id,
			"the head is %q, the writer expected %q", head, expectedHead)
	case cp.Parent != expectedHead:
		return Cond(sandbox.FailedPrecondition, store.ErrParentMismatch, OpAppendCheckpoint, id,
			"the parent %q is not the expected head %q", cp.Parent, expectedHead)
	}
	return nil
}

// NotHead is the error for deleting a checkpoint that is not the head.
func NotHead(thread, id, head string) error {
	return Cond(sandbox.FailedPrecondition, store.ErrNotHead, OpDeleteHead, thread+"/"+id,
		"the head is %q", head)
}

// BlobCursor encodes the last digest of a page as ListBlobs' cursor.
func BlobCursor(last string) string { return "d1." + last }

// ParseBlobCursor decodes a ListBlobs cursor ("" = from the start) into
// the digest to list after.
func ParseBlobCursor(op, cursor string) (string, error) {
	if cursor == "" {
		return "", nil
	}
	d, ok := strings.CutPrefix(cursor, "d1.")
	if !ok || !ValidDigest(d) {
		return "", sandbox.Errorf(sandbox.InvalidArgument, op, "", "malformed cursor")
	}
	return d, nil
}

// BlobLimit validates ListBlobs' limit and applies the default.
func BlobLimit(op string, limit int) (int, error) {
	if err := ValidateLimit(op, limit); err != nil {
		return 0, err
	}
	if limit == 0 {
		limit = DefaultBlobPage
	}
	return limit, nil
}

// CheckpointColumns are the checkpoint table's columns ScanCheckpoint reads
// and CheckpointValues gives, in order. entries holds the entries as a JSON
// array, so that listing a thread reads one row per checkpoint.
const CheckpointColumns = `tenant, thread_id, id, parent, created_at, reason, label, source_run_id, source_thread_id, source_checkpoint_id, conversation, bytes, entries`

// CheckpointValues are the values of CheckpointColumns for an INSERT.
func CheckpointValues(cp store.Checkpoint) ([]any, error) {
	entries, err := json.Marshal(cp.Entries)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, OpAppendCheckpoint, cp.ThreadID+"/"+cp.ID, err)
	}
	return []any{cp.Tenant, cp.ThreadID, cp.ID, NullString(cp.Parent), MS(cp.CreatedAt), string(cp.Reason),
		NullString(cp.Label), NullString(cp.SourceRunID), NullString(cp.SourceThreadID),
		NullString(cp.SourceCheckpointID), NullString(cp.Conversation), cp.Bytes, string(entries)}, nil
}

// ScanCheckpoint reads a row of CheckpointColumns.
func ScanCheckpoint(scan func(dest ...any) error) (store.Checkpoint, error) {
	var (
		cp                                         store.Checkpoint
		reason, entries                            string
		parent, label, runID, srcThread, srcID, cv *string
		created                                    int64
	)
	if err := scan(&cp.Tenant, &cp.ThreadID, &cp.ID, &parent, &created, &reason, &label, &runID,
		&srcThread, &srcID, &cv, &cp.Bytes, &entries); err != nil {
		return store.Checkpoint{}, err
	}
	if err := json.Unmarshal([]byte(entries), &cp.Entries); err != nil {
		return store.Checkpoint{}, fmt.Errorf("checkpoint %s/%s: stored entries: %w", cp.ThreadID, cp.ID, err)
	}
	if cp.Entries == nil {
		cp.Entries = []store.Entry{}
	}
	cp.Parent = StringFromNull(parent)
	cp.CreatedAt = FromMS(created)
	cp.Reason = store.CheckpointReason(reason)
	cp.Label = StringFromNull(label)
	cp.SourceRunID = StringFromNull(runID)
	cp.SourceThreadID = StringFromNull(srcThread)
	cp.SourceCheckpointID = StringFromNull(srcID)
	cp.Conversation = StringFromNull(cv)
	return cp, nil
}

// ScanWriter reads a thread row's writer columns (token, fence, expires_at
// in epoch milliseconds or NULL).
func ScanWriter(token *string, fence int64, expires *int64) WriterRow {
	return WriterRow{Token: StringFromNull(token), Fence: fence, Expires: TimeFromNull(expires)}
}
