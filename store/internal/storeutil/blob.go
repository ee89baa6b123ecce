package storeutil

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// DigestMismatch is the error for bytes that do not hash to their digest
// or whose length is not the size given.
func DigestMismatch(op, digest, format string, args ...any) error {
	return Cond(sandbox.InvalidArgument, store.ErrBlobDigest, op, digest, format, args...)
}

// Verifier hashes bytes as they stream past and checks them at the end.
type Verifier struct {
	h hash.Hash
	n int64
}

// NewVerifier returns an empty Verifier.
func NewVerifier() *Verifier { return &Verifier{h: sha256.New()} }

// Write hashes p.
func (v *Verifier) Write(p []byte) (int, error) {
	v.n += int64(len(p))
	return v.h.Write(p)
}

// Check reports whether the bytes written hash to digest and, when size is
// not negative, number size.
func (v *Verifier) Check(op, digest string, size int64) error {
	if size >= 0 && v.n != size {
		return DigestMismatch(op, digest, "read %d bytes, the size given is %d", v.n, size)
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); got != digest {
		return DigestMismatch(op, digest, "the bytes hash to %s", got)
	}
	return nil
}

// ReadBlob reads the bytes of a PutBlob (size < 0 = unknown; a known size
// bounds the read) and verifies them against digest.
func ReadBlob(ctx context.Context, op, digest string, r io.Reader, size int64) ([]byte, error) {
	if err := ValidateDigest(op, digest); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, digest, "no data")
	}
	if size >= 0 {
		r = io.LimitReader(r, size+1)
	}
	var buf bytes.Buffer
	if size > 0 && size < 1<<30 {
		buf.Grow(int(size))
	}
	v := NewVerifier()
	if _, err := io.Copy(io.MultiWriter(&buf, v), r); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, sandbox.Wrap(sandbox.Canceled, op, digest, cerr)
		}
		return nil, sandbox.Wrap(sandbox.Unavailable, op, digest, err)
	}
	if err := v.Check(op, digest, size); err != nil {
		return nil, err
	}
	if buf.Len() == 0 {
		return []byte{}, nil // an empty blob is still a value (NOT NULL columns)
	}
	return buf.Bytes(), nil
}
