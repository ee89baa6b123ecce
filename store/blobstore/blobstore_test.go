package blobstore_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/blobstore"
	"github.com/d10ffeed/corral/store/storetest"
)

func fileURL(dir string) string {
	return "file://" + (&url.URL{Path: filepath.ToSlash(dir)}).EscapedPath()
}

func open(t *testing.T, u string) *blobstore.Store {
	t.Helper()
	s, err := blobstore.Open(t.Context(), u)
	if err != nil {
		t.Fatalf("Open %s: %v", u, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestFile(t *testing.T) {
	storetest.RunBlobStore(t, func(t *testing.T) store.BlobStore { return open(t, fileURL(t.TempDir())) })
}

func TestMem(t *testing.T) {
	storetest.RunBlobStore(t, func(t *testing.T) store.BlobStore { return open(t, "mem://") })
}

// TestFileLayout: blobs are files under blobs/sha256/, and a refused put
// leaves no file (not even a temporary one) behind.
func TestFileLayout(t *testing.T) {
	dir := t.TempDir()
	s := open(t, fileURL(dir))
	data := []byte("layout")
	sum := sha256.Sum256(data)
	d := hex.EncodeToString(sum[:])
	if err := s.PutBlob(t.Context(), d, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("PutBlob: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", d))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the blob's file: %q, %v", got, err)
	}
	wrong := strings.Repeat("0", 64)
	err = s.PutBlob(t.Context(), wrong, bytes.NewReader(data), int64(len(data)))
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("PutBlob of a wrong digest: %v", err)
	}
	var files []string
	_ = filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			files = append(files, strings.TrimPrefix(p, dir))
		}
		return nil
	})
	if len(files) > 2 { // the blob and, with some versions, its .attrs sidecar
		t.Fatalf("files after a refused put: %v", files)
	}
	for _, f := range files {
		if strings.Contains(f, wrong) {
			t.Fatalf("a refused put left %s", f)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	for _, u := range []string{"nosuch://bucket", "s3://bucket?secret=hunter2", "gs://user:hunter2@bucket", "file:///nonexistent-dir-corral/x?hunter2=1"} {
		_, err := blobstore.Open(t.Context(), u)
		if err == nil {
			t.Fatalf("Open(%q) succeeded without the driver", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("Open's error shows the URL's query: %v", err)
		}
	}
}
