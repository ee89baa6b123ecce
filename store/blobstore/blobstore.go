// Package blobstore is a store.BlobStore over any gocloud.dev/blob bucket:
// a directory (file://), memory (mem://), or, with the driver linked in by
// the program, S3, Google Cloud Storage or Azure Blob Storage.
//
// Open links only the fileblob and memblob drivers, so that corral does not
// pull every cloud SDK into every binary. A program that keeps blobs in a
// cloud bucket imports the driver it wants with a blank import, and Open
// then accepts its URLs:
//
//	import _ "gocloud.dev/blob/s3blob"    // s3://bucket?region=...
//	import _ "gocloud.dev/blob/gcsblob"   // gs://bucket
//	import _ "gocloud.dev/blob/azureblob" // azblob://container
//
// Blobs are kept under the key blobs/sha256/<hex>. (gocloud's own
// ?prefix= URL parameter puts the whole tree under a further prefix.)
package blobstore

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strconv"
	"strings"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	_ "gocloud.dev/blob/memblob"  // mem:// URLs
	"gocloud.dev/gcerrors"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// KeyPrefix is the prefix of every blob's key; the digest follows it.
const KeyPrefix = "blobs/sha256/"

// Store is a store.BlobStore on a bucket.
type Store struct {
	bucket *blob.Bucket
	owned  bool // Close closes the bucket
}

var _ store.BlobStore = (*Store)(nil)

// Open opens the bucket at url (file:///dir, mem://, or the URL of a
// driver the program imported) as a blob store. Close closes the bucket.
func Open(ctx context.Context, url string) (*Store, error) {
	const op = storeutil.OpOpen
	b, err := blob.OpenBucket(ctx, url)
	if err != nil {
		return nil, openError(ctx, url, err)
	}
	return &Store{bucket: b, owned: true}, nil
}

// New is a blob store on a bucket the caller opened; the caller closes the
// bucket after the store's last use (Close leaves it open).
func New(b *blob.Bucket) *Store { return &Store{bucket: b} }

// Close closes the bucket if Open opened it.
func (s *Store) Close() error {
	if !s.owned {
		return nil
	}
	return wrap(context.Background(), storeutil.OpClose, "", s.bucket.Close())
}

// redactURL drops a URL's query and user info, which may hold credentials.
func redactURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		u = u[:i]
	}
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		u = scheme + "://" + rest
	}
	return u
}

// openError reports a failed Open without the URL's query or user info
// (credentials may be there): the cause is not kept, its text is kept only
// with the URL replaced by its redacted form.
func openError(ctx context.Context, url string, err error) error {
	safe := redactURL(url)
	msg := err.Error()
	for _, form := range []string{strconv.Quote(url), url} {
		msg = strings.ReplaceAll(msg, form, strconv.Quote(safe))
	}
	for _, secret := range urlSecrets(url) {
		if strings.Contains(msg, secret) {
			msg = "cannot open the bucket"
		}
	}
	code := wrap(ctx, storeutil.OpOpen, safe, err).(*sandbox.Error).Code
	return &sandbox.Error{Code: code, Op: storeutil.OpOpen, ID: safe, Msg: msg}
}

// urlSecrets returns the parts of url that redactURL drops: the query's
// keys and values, the fragment, and the user info.
func urlSecrets(u string) []string {
	var out []string
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		for _, part := range strings.FieldsFunc(u[i+1:], func(r rune) bool { return strings.ContainsRune("&=#?", r) }) {
			if len(part) >= 3 { // shorter parts would match almost any text
				out = append(out, part)
			}
		}
		u = u[:i]
	}
	if _, rest, ok := strings.Cut(u, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at > 0 {
			out = append(out, rest[:at])
		}
	}
	return out
}

func key(digest string) string { return KeyPrefix + digest }

// codeOf maps a gocloud error code to corral's.
func codeOf(err error) sandbox.Code {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return sandbox.NotFound
	case gcerrors.AlreadyExists:
		return sandbox.AlreadyExists
	case gcerrors.InvalidArgument:
		return sandbox.InvalidArgument
	case gcerrors.FailedPrecondition:
		return sandbox.FailedPrecondition
	case gcerrors.PermissionDenied:
		return sandbox.PermissionDenied
	case gcerrors.Unimplemented:
		return sandbox.Unimplemented
	case gcerrors.ResourceExhausted:
		return sandbox.ResourceExhausted
	case gcerrors.Canceled:
		return sandbox.Canceled
	case gcerrors.DeadlineExceeded:
		return sandbox.DeadlineExceeded
	case gcerrors.Internal:
		return sandbox.Internal
	}
	return sandbox.Unavailable
}

func wrap(ctx context.Context, op, id string, err error) error {
	if err == nil {
		return nil
	}
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	code := codeOf(err)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		code = sandbox.Canceled
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		code = sandbox.DeadlineExceeded
	}
	return &sandbox.Error{Code: code, Op: op, ID: id, Err: err}
}

// PutBlob implements store.BlobStore. The bytes are hashed as they stream
// to the bucket; when they do not match the digest (or the size), the
// write is aborted, so no object holds them. A blob already stored is not
// written again (its bytes are still checked against the digest).
func (s *Store) PutBlob(ctx context.Context, digest string, data io.Reader, size int64) error {
	const op = storeutil.OpPutBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return err
	}
	if data == nil {
		return sandbox.Errorf(sandbox.InvalidArgument, op, digest, "no data")
	}
	if size >= 0 {
		data = io.LimitReader(data, size+1)
	}
	k := key(digest)
	exists, err := s.bucket.Exists(ctx, k)
	if err != nil {
		return wrap(ctx, op, digest, err)
	}
	v := storeutil.NewVerifier()
	if exists {
		if _, err := io.Copy(v, data); err != nil {
			return wrap(ctx, op, digest, err)
		}
		return v.Check(op, digest, size)
	}
	wctx, abort := context.WithCancel(ctx)
	defer abort()
	w, err := s.bucket.NewWriter(wctx, k, &blob.WriterOptions{
		ContentType: "application/octet-stream", DisableContentTypeDetection: true,
	})
	if err != nil {
		return wrap(ctx, op, digest, err)
	}
	_, err = io.Copy(io.MultiWriter(w, v), data)
	if err == nil {
		err = v.Check(op, digest, size)
	}
	if err != nil {
		abort() // cancelling the writer's context before Close discards the write
		_ = w.Close()
		// A driver that stored something regardless: remove it.
		_ = s.bucket.Delete(context.WithoutCancel(ctx), k)
		return wrap(ctx, op, digest, err)
	}
	return wrap(ctx, op, digest, w.Close())
}

// HasBlob implements store.BlobStore.
func (s *Store) HasBlob(ctx context.Context, digest string) (bool, error) {
	const op = storeutil.OpHasBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return false, err
	}
	ok, err := s.bucket.Exists(ctx, key(digest))
	return ok, wrap(ctx, op, digest, err)
}

// OpenBlob implements store.BlobStore.
func (s *Store) OpenBlob(ctx context.Context, digest string) (io.ReadCloser, error) {
	const op = storeutil.OpOpenBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return nil, err
	}
	r, err := s.bucket.NewReader(ctx, key(digest), nil)
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil, storeutil.BlobNotFound(op, digest)
	}
	if err != nil {
		return nil, wrap(ctx, op, digest, err)
	}
	return r, nil
}

// DeleteBlob implements store.BlobStore.
func (s *Store) DeleteBlob(ctx context.Context, digest string) error {
	const op = storeutil.OpDeleteBlob
	if err := storeutil.ValidateDigest(op, digest); err != nil {
		return err
	}
	err := s.bucket.Delete(ctx, key(digest))
	if gcerrors.Code(err) == gcerrors.NotFound {
		return nil
	}
	return wrap(ctx, op, digest, err)
}

// cursorPrefix marks this store's cursors: the bucket's page token, base64.
const cursorPrefix = "b1."

// ListBlobs implements store.BlobStore. The cursor wraps the bucket's page
// token; a page may hold fewer than limit digests (keys under the prefix
// that are not digests are skipped) and still have a next cursor.
func (s *Store) ListBlobs(ctx context.Context, cursor string, limit int) ([]string, string, error) {
	const op = storeutil.OpListBlobs
	limit, err := storeutil.BlobLimit(op, limit)
	if err != nil {
		return nil, "", err
	}
	token := blob.FirstPageToken
	if cursor != "" {
		raw, ok := strings.CutPrefix(cursor, cursorPrefix)
		var derr error
		if ok {
			token, derr = base64.RawURLEncoding.DecodeString(raw)
		}
		if !ok || derr != nil || len(token) == 0 {
			return nil, "", sandbox.Errorf(sandbox.InvalidArgument, op, "", "malformed cursor")
		}
	}
	objs, next, err := s.bucket.ListPage(ctx, token, limit, &blob.ListOptions{Prefix: KeyPrefix})
	if errors.Is(err, io.EOF) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", wrap(ctx, op, "", err)
	}
	var out []string
	for _, o := range objs {
		if d, ok := strings.CutPrefix(o.Key, KeyPrefix); ok && !o.IsDir && storeutil.ValidDigest(d) {
			out = append(out, d)
		}
	}
	if len(next) == 0 {
		return out, "", nil
	}
	return out, cursorPrefix + base64.RawURLEncoding.EncodeToString(next), nil
}
