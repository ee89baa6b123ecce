package vercelfake

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// abs resolves p against cwd (default the session's cwd), as the API.
func abs(se *session, cwd, p string) string {
	if cwd == "" {
		cwd = se.sb.sb.Root
	}
	if !path.IsAbs(p) {
		p = path.Join(cwd, p)
	}
	return path.Clean(p)
}

type pathBody struct {
	Path string `json:"path"`
	Cwd  string `json:"cwd"`
}

// mkdir makes one directory; an existing path is 400 "File exists".
func (s *Server) mkdir(w http.ResponseWriter, r *http.Request, se *session) {
	var body pathBody
	if err := fakecloud.DecodeJSON(r, &body); err != nil || body.Path == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "path is required")
		return
	}
	p := abs(se, body.Cwd, body.Path)
	if err := os.Mkdir(p, 0o755); err != nil {
		switch {
		case errors.Is(err, fs.ErrExist):
			apiError(w, http.StatusBadRequest, "bad_request", "mkdir %s: File exists", body.Path)
		case errors.Is(err, fs.ErrNotExist):
			apiError(w, http.StatusBadRequest, "bad_request", "mkdir %s: No such file or directory", body.Path)
		default:
			apiError(w, http.StatusBadRequest, "bad_request", "mkdir %s: %v", body.Path, errors.Unwrap(err))
		}
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{})
}

// read answers the file's bytes, or 404 with no body.
func (s *Server) read(w http.ResponseWriter, r *http.Request, se *session) {
	var body pathBody
	if err := fakecloud.DecodeJSON(r, &body); err != nil || body.Path == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "path is required")
		return
	}
	f, err := os.Open(abs(se, body.Cwd, body.Path))
	if err != nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || fi.IsDir() {
		apiError(w, http.StatusBadRequest, "bad_request", "%s is a directory", body.Path)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// write extracts a gzipped tar under the x-cwd header (default /),
// making parent directories.
func (s *Server) write(w http.ResponseWriter, r *http.Request, se *session) {
	dir := r.Header.Get("x-cwd")
	if dir == "" {
		dir = "/"
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "the body is not gzip: %v", err)
		return
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", "bad tarball: %v", err)
			return
		}
		p := abs(se, dir, h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				mode := os.FileMode(h.Mode) & 0o7777
				if mode == 0 {
					mode = 0o644
				}
				var f *os.File
				if f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode); err == nil {
					_, err = io.Copy(f, tr)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					if err == nil {
						err = os.Chmod(p, mode)
					}
				}
			}
		default:
			continue
		}
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad_request", "write %s: %v", h.Name, err)
			return
		}
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{})
}
