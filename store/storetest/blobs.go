package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// RunBlobStore checks the BlobStore contract; open returns a fresh, empty
// blob store for one test (the caller closes it, if it needs closing).
func RunBlobStore(t *testing.T, open func(t *testing.T) store.BlobStore) {
	t.Run("PutHasOpenDelete", func(t *testing.T) { testBlobBasics(t, open(t)) })
	t.Run("WrongDigestRefused", func(t *testing.T) { testBlobWrongDigest(t, open(t)) })
	t.Run("IdempotentPut", func(t *testing.T) { testBlobIdempotent(t, open(t)) })
	t.Run("ListPaging", func(t *testing.T) { testBlobList(t, open(t)) })
	t.Run("LargeBlob", func(t *testing.T) { testBlobLarge(t, open(t)) })
}

func blobOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func readBlob(t *testing.T, s store.BlobStore, d string) []byte {
	t.Helper()
	rc, err := s.OpenBlob(t.Context(), d)
	must(t, err, "OpenBlob "+d)
	defer rc.Close()
	b, err := io.ReadAll(rc)
	must(t, err, "reading blob "+d)
	return b
}

func has(t *testing.T, s store.BlobStore, d string) bool {
	t.Helper()
	ok, err := s.HasBlob(t.Context(), d)
	must(t, err, "HasBlob "+d)
	return ok
}

func put(t *testing.T, s store.BlobStore, data []byte) string {
	t.Helper()
	d := blobOf(data)
	must(t, s.PutBlob(t.Context(), d, bytes.NewReader(data), int64(len(data))), "PutBlob "+d)
	return d
}

func testBlobBasics(t *testing.T, s store.BlobStore) {
	data := []byte("hello, blob")
	d := blobOf(data)
	if has(t, s, d) {
		t.Fatal("HasBlob of a new store is true")
	}
	_, err := s.OpenBlob(t.Context(), d)
	wantCode(t, err, sandbox.NotFound, "OpenBlob of a missing blob")
	put(t, s, data)
	if !has(t, s, d) {
		t.Fatal("HasBlob after PutBlob is false")
	}
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatalf("OpenBlob = %q, want %q", got, data)
	}
	empty := put(t, s, nil)
	if got := readBlob(t, s, empty); len(got) != 0 {
		t.Fatalf("empty blob read back as %q", got)
	}
	// An unknown size (-1) is accepted.
	other := []byte("size unknown")
	must(t, s.PutBlob(t.Context(), blobOf(other), bytes.NewReader(other), -1), "PutBlob with size -1")
	must(t, s.DeleteBlob(t.Context(), d), "DeleteBlob")
	if has(t, s, d) {
		t.Fatal("HasBlob after DeleteBlob is true")
	}
	must(t, s.DeleteBlob(t.Context(), d), "DeleteBlob of an absent blob")
	for _, bad := range []string{"", "abc", strings.ToUpper(d), d + "0", "../" + d[3:], strings.Repeat("g", 64)} {
		_, err := s.HasBlob(t.Context(), bad)
		wantCode(t, err, sandbox.InvalidArgument, fmt.Sprintf("HasBlob(%q)", bad))
		_, err = s.OpenBlob(t.Context(), bad)
		wantCode(t, err, sandbox.InvalidArgument, fmt.Sprintf("OpenBlob(%q)", bad))
		wantCode(t, s.DeleteBlob(t.Context(), bad), sandbox.InvalidArgument, fmt.Sprintf("DeleteBlob(%q)", bad))
		err = s.PutBlob(t.Context(), bad, bytes.NewReader(data), int64(len(data)))
		wantCode(t, err, sandbox.InvalidArgument, fmt.Sprintf("PutBlob(%q)", bad))
	}
}

func testBlobWrongDigest(t *testing.T, s store.BlobStore) {
	data := []byte("the real bytes")
	claimed := blobOf([]byte("other bytes"))
	err := s.PutBlob(t.Context(), claimed, bytes.NewReader(data), int64(len(data)))
	wantCode(t, err, sandbox.InvalidArgument, "PutBlob with the wrong digest")
	if !errors.Is(err, store.ErrBlobDigest) {
		t.Fatalf("PutBlob with the wrong digest: %v, want ErrBlobDigest", err)
	}
	if has(t, s, claimed) {
		t.Fatal("a blob with the wrong digest was stored")
	}
	d := blobOf(data)
	err = s.PutBlob(t.Context(), d, bytes.NewReader(data), int64(len(data))+1)
	wantCode(t, err, sandbox.InvalidArgument, "PutBlob with a short read")
	err = s.PutBlob(t.Context(), d, bytes.NewReader(data), int64(len(data))-1)
	wantCode(t, err, sandbox.InvalidArgument, "PutBlob with more bytes than its size")
	if has(t, s, d) {
		t.Fatal("a blob of the wrong size was stored")
	}
	// A reader that fails midway stores nothing.
	err = s.PutBlob(t.Context(), d, io.MultiReader(bytes.NewReader(data[:4]), errReader{}), int64(len(data)))
	if err == nil {
		t.Fatal("PutBlob from a failing reader succeeded")
	}
	if has(t, s, d) {
		t.Fatal("a blob from a failing reader was stored")
	}
	if blobs, _, err := s.ListBlobs(t.Context(), "", 0); err != nil || len(blobs) != 0 {
		t.Fatalf("ListBlobs after refused puts = %v, %v", blobs, err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("reader broke") }

func testBlobIdempotent(t *testing.T, s store.BlobStore) {
	data := []byte("twice")
	d := put(t, s, data)
	put(t, s, data)
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatalf("after two puts the blob reads %q", got)
	}
	blobs, _, err := s.ListBlobs(t.Context(), "", 0)
	must(t, err, "ListBlobs")
	if len(blobs) != 1 || blobs[0] != d {
		t.Fatalf("ListBlobs = %v, want [%s]", blobs, d)
	}
	// A put of a blob it has, with wrong bytes, is still refused.
	err = s.PutBlob(t.Context(), d, strings.NewReader("not twice"), 9)
	wantCode(t, err, sandbox.InvalidArgument, "PutBlob of a stored digest with other bytes")
}

func testBlobList(t *testing.T, s store.BlobStore) {
	var want []string
	for i := range 23 {
		want = append(want, put(t, s, fmt.Appendf(nil, "blob %d", i)))
	}
	slices.Sort(want)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("ListBlobs does not end")
		}
		page, next, err := s.ListBlobs(t.Context(), cursor, 5)
		must(t, err, "ListBlobs")
		if len(page) > 5 {
			t.Fatalf("ListBlobs returned %d, over the limit 5", len(page))
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged ListBlobs = %v\nwant %v", got, want)
	}
	all, next, err := s.ListBlobs(t.Context(), "", 100)
	must(t, err, "ListBlobs of all")
	if !slices.Equal(all, want) || next != "" {
		t.Fatalf("ListBlobs(limit 100) = %v, %q", all, next)
	}
	_, _, err = s.ListBlobs(t.Context(), "", -1)
	wantCode(t, err, sandbox.InvalidArgument, "ListBlobs with a negative limit")
	_, _, err = s.ListBlobs(t.Context(), "not a cursor \x00", 5)
	wantCode(t, err, sandbox.InvalidArgument, "ListBlobs with a malformed cursor")
}

func testBlobLarge(t *testing.T, s store.BlobStore) {
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	d := put(t, s, data)
	if got := readBlob(t, s, d); !bytes.Equal(got, data) {
		t.Fatalf("8 MiB blob read back as %d bytes, different", len(got))
	}
}

// AllBlobs returns every digest s lists, following its pages.
func AllBlobs(t *testing.T, s store.BlobStore) []string {
	t.Helper()
	var out []string
	for cursor := ""; ; {
		page, next, err := s.ListBlobs(t.Context(), cursor, 0)
		must(t, err, "ListBlobs")
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
}
