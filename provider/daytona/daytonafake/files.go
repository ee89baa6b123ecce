package daytonafake

import (
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

func (s *Server) filesRoutes(p string) {
	s.Handle("filesList", "GET "+p+"/files", s.filesList)
	s.Handle("filesInfo", "GET "+p+"/files/info", s.filesInfo)
	s.Handle("filesDelete", "DELETE "+p+"/files", s.filesDelete)
	s.Handle("folder", "POST "+p+"/files/folder", s.folder)
	s.Handle("upload", "POST "+p+"/files/bulk-upload", s.upload)
	s.Handle("download", "POST "+p+"/files/bulk-download", s.download)
}

// path resolves a sandbox path (the fake's sandboxes see host paths; only
// the sandbox's own directory is reachable). A relative path is relative
// to the user's home, as in the daemon.
func (d *sandbox) path(p string) (string, error) {
	if p == "" {
		return "", fmt.Errorf("path is required")
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.sb.Home, p)
	}
	p = filepath.Clean(p)
	if p != d.sb.Dir && !strings.HasPrefix(p, d.sb.Dir+string(os.PathSeparator)) {
		return "", fmt.Errorf("permission denied: %s", p)
	}
	return p, nil
}

func (s *Server) pathArg(w http.ResponseWriter, r *http.Request, name string) (*sandbox, string, bool) {
	d, ok := s.running(w, r)
	if !ok {
		return nil, "", false
	}
	p, err := d.path(r.URL.Query().Get(name))
	if err != nil {
		daemonError(w, http.StatusBadRequest, "INVALID_FILE_PATH", "%v", err)
		return nil, "", false
	}
	return d, p, true
}

func fileInfo(path string, fi os.FileInfo) map[string]any {
	mod := fi.ModTime().UTC().Format(time.RFC3339Nano)
	return map[string]any{"name": fi.Name(), "path": path, "isDir": fi.IsDir(), "size": fi.Size(),
		"mode": fi.Mode().String(), "permissions": fmt.Sprintf("%#o", fi.Mode().Perm()),
		"modTime": mod, "modifiedAt": mod, "owner": "daytona", "group": "daytona"}
}

func statError(w http.ResponseWriter, err error) {
	if os.IsNotExist(err) {
		daemonError(w, http.StatusNotFound, "FILE_NOT_FOUND", "file not found: %v", err)
		return
	}
	daemonError(w, http.StatusBadRequest, "FILE_READ_FAILED", "%v", err)
}

func (s *Server) filesList(w http.ResponseWriter, r *http.Request) {
	_, p, ok := s.pathArg(w, r, "path")
	if !ok {
		return
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		statError(w, err)
		return
	}
	out := []map[string]any{}
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			out = append(out, fileInfo(filepath.Join(p, e.Name()), fi))
		}
	}
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) filesInfo(w http.ResponseWriter, r *http.Request) {
	_, p, ok := s.pathArg(w, r, "path")
	if !ok {
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		statError(w, err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, fileInfo(p, fi))
}

func (s *Server) filesDelete(w http.ResponseWriter, r *http.Request) {
	_, p, ok := s.pathArg(w, r, "path")
	if !ok {
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		statError(w, err)
		return
	}
	if fi.IsDir() && r.URL.Query().Get("recursive") != "true" {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "cannot delete directory without recursive flag")
		return
	}
	if err := os.RemoveAll(p); err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) folder(w http.ResponseWriter, r *http.Request) {
	_, p, ok := s.pathArg(w, r, "path")
	if !ok {
		return
	}
	mode, err := strconv.ParseUint(r.URL.Query().Get("mode"), 8, 32)
	if err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "invalid mode")
		return
	}
	if err := os.MkdirAll(p, os.FileMode(mode)); err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "%v", err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

// upload is files/bulk-upload: multipart parts files[i].path and
// files[i].file; parent directories are made (0755) and each file is
// created or truncated (following links, as the daemon's os.Create does).
// As the daemon, it goes on past a file it cannot write and answers 400
// {"errors": [...], "files": [...]} when one failed.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	d, ok := s.running(w, r)
	if !ok {
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		fakecloud.WriteJSON(w, http.StatusBadRequest, map[string]any{"errors": []string{"invalid multipart form"}})
		return
	}
	type result struct {
		Path  string `json:"path"`
		Bytes int64  `json:"bytes"`
	}
	paths := map[string]string{}
	errs := []string{}
	files := []result{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("reading part: %v", err))
			break
		}
		name := part.FormName()
		idx, field, ok := strings.Cut(strings.TrimPrefix(name, "files["), "].")
		if !ok || !strings.HasPrefix(name, "files[") {
			continue
		}
		switch field {
		case "path":
			b, _ := io.ReadAll(io.LimitReader(part, 4096))
			paths[idx] = strings.TrimSpace(string(b))
		case "file":
			dst, ok := paths[idx]
			if !ok {
				errs = append(errs, fmt.Sprintf("file[%s]: missing .path metadata", idx))
				continue
			}
			p, err := d.path(dst)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", dst, err))
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				errs = append(errs, fmt.Sprintf("%s: mkdir %s: %v", dst, filepath.Dir(dst), err))
				continue
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: create: %v", dst, err))
				continue
			}
			n, err := io.Copy(f, part)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: write: %v", dst, err))
				continue
			}
			files = append(files, result{Path: dst, Bytes: n})
		}
	}
	_, _ = io.Copy(io.Discard, r.Body)
	if len(errs) > 0 {
		fakecloud.WriteJSON(w, http.StatusBadRequest, map[string]any{"errors": errs, "files": files})
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"files": files})
}

// download is files/bulk-download: {"paths": [...]} answered as
// multipart/form-data, a "file" part per path (filename = the path) or an
// "error" part with a JSON body.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	d, ok := s.running(w, r)
	if !ok {
		return
	}
	var req struct {
		Paths []string `json:"paths"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil || len(req.Paths) == 0 {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "paths are required")
		return
	}
	mw := multipart.NewWriter(w)
	w.Header().Set("Content-Type", mw.FormDataContentType())
	w.WriteHeader(http.StatusOK)
	for _, src := range req.Paths {
		p, err := d.path(src)
		var b []byte
		if err == nil {
			var fi os.FileInfo
			if fi, err = os.Stat(p); err == nil && fi.IsDir() {
				err = fmt.Errorf("path is a directory")
			} else if err == nil {
				b, err = os.ReadFile(p)
			}
		}
		h := textproto.MIMEHeader{}
		if err != nil {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="error"; filename=%q`, src))
			h.Set("Content-Type", "application/json")
			pw, _ := mw.CreatePart(h)
			code, status := "FILE_READ_FAILED", 400
			if os.IsNotExist(err) {
				code, status = "FILE_NOT_FOUND", 404
			}
			_ = json.NewEncoder(pw).Encode(map[string]any{"message": err.Error(), "statusCode": status, "code": code})
			continue
		}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, src))
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		pw, _ := mw.CreatePart(h)
		_, _ = pw.Write(b)
	}
	_ = mw.Close()
}
