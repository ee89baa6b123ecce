package spritesfake

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// fsError writes the filesystem API's error body.
func fsError(w http.ResponseWriter, err error, path string) {
	status, code := http.StatusInternalServerError, "EIO"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		status, code = http.StatusNotFound, "ENOENT"
	case errors.Is(err, fs.ErrExist):
		status, code = http.StatusConflict, "EEXIST"
	case errors.Is(err, fs.ErrPermission):
		status, code = http.StatusForbidden, "EACCES"
	case errors.Is(err, syscall.EISDIR):
		status, code = http.StatusBadRequest, "EISDIR"
	case errors.Is(err, syscall.ENOTDIR):
		status, code = http.StatusBadRequest, "ENOTDIR"
	case errors.Is(err, syscall.ENOTEMPTY):
		status, code = http.StatusConflict, "ENOTEMPTY"
	}
	fakecloud.WriteJSON(w, status, map[string]string{"error": err.Error(), "code": code, "path": path})
}

// resolve maps path (relative to workingDir, default "/") onto the host
// and keeps it inside the Sprite's directory.
func resolve(sp *sprite, path, workingDir string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("path is required: %w", fs.ErrInvalid)
	}
	if workingDir == "" {
		workingDir = "/"
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(workingDir, path)
	}
	path = filepath.Clean(path)
	if path != sp.sb.Dir && !strings.HasPrefix(path, sp.sb.Dir+"/") {
		return "", fmt.Errorf("%s is outside the sprite's file system: %w", path, fs.ErrPermission)
	}
	return path, nil
}

func (s *Server) fsRead(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	q := r.URL.Query()
	path, err := resolve(sp, q.Get("path"), q.Get("workingDir"))
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	s.mu.Lock()
	bad := sp.badReads > 0
	if bad {
		sp.badReads--
	}
	s.mu.Unlock()
	if bad {
		// The quirk: after a restore the overlay lists before it reads.
		fakecloud.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "filesystem is still being restored", "code": "EIO", "path": q.Get("path")})
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(data)
}

func (s *Server) fsWrite(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	q := r.URL.Query()
	path, err := resolve(sp, q.Get("path"), q.Get("workingDir"))
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	mode := os.FileMode(0o644)
	if m := q.Get("mode"); m != "" {
		n, err := strconv.ParseUint(m, 8, 32)
		if err != nil {
			fsError(w, fmt.Errorf("bad mode %q: %w", m, fs.ErrInvalid), q.Get("path"))
			return
		}
		mode = os.FileMode(n)
	}
	if q.Get("mkdirParents") == "true" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fsError(w, err, q.Get("path"))
			return
		}
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 256<<20))
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"path": path, "size": len(data), "mode": fmt.Sprintf("%04o", mode)})
}

// Entry is one fs/list entry.
type Entry struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	IsDir   bool   `json:"isDir"`
	Size    int64  `json:"size"`
	Mode    string `json:"mode"`
	ModTime string `json:"modTime"`
	Type    string `json:"type"`
}

func entry(path string, fi fs.FileInfo) Entry {
	t := "file"
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		t = "symlink"
	case fi.IsDir():
		t = "directory"
	}
	return Entry{Name: fi.Name(), Path: path, IsDir: fi.IsDir(), Size: fi.Size(), Mode: fmt.Sprintf("%04o", fi.Mode().Perm()),
		ModTime: fi.ModTime().UTC().Format(time.RFC3339Nano), Type: t}
}

func (s *Server) fsList(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	q := r.URL.Query()
	path, err := resolve(sp, q.Get("path"), q.Get("workingDir"))
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	fi, err := os.Lstat(path)
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	out := struct {
		Path    string  `json:"path"`
		Entries []Entry `json:"entries"`
		Count   int     `json:"count"`
	}{Path: path, Entries: []Entry{}}
	if !fi.IsDir() {
		out.Entries = append(out.Entries, entry(path, fi))
	} else {
		des, err := os.ReadDir(path)
		if err != nil {
			fsError(w, err, q.Get("path"))
			return
		}
		for _, de := range des {
			if info, err := de.Info(); err == nil {
				out.Entries = append(out.Entries, entry(filepath.Join(path, de.Name()), info))
			}
		}
		sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Name < out.Entries[j].Name })
	}
	out.Count = len(out.Entries)
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) fsDelete(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	q := r.URL.Query()
	path, err := resolve(sp, q.Get("path"), q.Get("workingDir"))
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	if _, err := os.Lstat(path); err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	if q.Get("recursive") == "true" {
		err = os.RemoveAll(path)
	} else {
		err = os.Remove(path)
	}
	if err != nil {
		fsError(w, err, q.Get("path"))
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"deleted": []string{path}})
}

func (s *Server) fsRename(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	var req struct {
		Source     string `json:"source"`
		Dest       string `json:"dest"`
		WorkingDir string `json:"workingDir"`
		AsRoot     *bool  `json:"asRoot"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		fsError(w, fmt.Errorf("%v: %w", err, fs.ErrInvalid), "")
		return
	}
	src, err := resolve(sp, req.Source, req.WorkingDir)
	if err != nil {
		fsError(w, err, req.Source)
		return
	}
	dst, err := resolve(sp, req.Dest, req.WorkingDir)
	if err != nil {
		fsError(w, err, req.Dest)
		return
	}
	if err := os.Rename(src, dst); err != nil {
		fsError(w, err, req.Source)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"source": src, "dest": dst})
}

// checkpoint is one checkpoint: a copy of the Sprite's directories.
type checkpoint struct {
	ID      string
	Comment string
	Created time.Time
	dir     string
}

// CheckpointJSON is a checkpoint as the API lists it.
type CheckpointJSON struct {
	ID         string   `json:"id"`
	CreateTime string   `json:"create_time"`
	Comment    string   `json:"comment,omitempty"`
	History    []string `json:"history,omitempty"`
	IsAuto     bool     `json:"is_auto"`
}

func (c checkpoint) json() CheckpointJSON {
	return CheckpointJSON{ID: c.ID, CreateTime: c.Created.Format(time.RFC3339Nano), Comment: c.Comment}
}

// copyTree copies src's contents into dst (made), preserving modes and
// links.
func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	out, err := exec.Command("cp", "-a", src+"/.", dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp: %v: %s", err, out)
	}
	return nil
}

func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	var req struct {
		Comment string `json:"comment"`
	}
	if r.ContentLength != 0 {
		if err := fakecloud.DecodeJSON(r, &req); err != nil {
			apiError(w, http.StatusBadRequest, "invalid_request", "%v", err)
			return
		}
	}
	s.mu.Lock()
	id := "v" + strconv.Itoa(len(sp.cps)+1)
	s.mu.Unlock()
	// Checkpoints live with the Sprite (inside its directory on the host,
	// out of the processes' sight), so they die with it.
	dir := filepath.Join(sp.sb.Dir, ".checkpoints", id)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	writeNDJSON(w, map[string]string{"type": "info", "data": "Creating checkpoint " + id})
	for _, d := range []string{"workspace", "home"} {
		if err := copyTree(filepath.Join(sp.sb.Dir, d), filepath.Join(dir, d)); err != nil {
			writeNDJSON(w, map[string]string{"type": "error", "error": err.Error()})
			return
		}
	}
	s.mu.Lock()
	sp.cps = append(sp.cps, checkpoint{ID: id, Comment: req.Comment, Created: time.Now().UTC(), dir: dir})
	s.mu.Unlock()
	writeNDJSON(w, map[string]string{"type": "info", "data": "Checkpoint " + id + " created"})
	writeNDJSON(w, map[string]string{"type": "complete", "data": id})
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	s.mu.Lock()
	out := []CheckpointJSON{}
	for i := len(sp.cps) - 1; i >= 0; i-- {
		out = append(out, sp.cps[i].json())
	}
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) findCheckpoint(w http.ResponseWriter, sp *sprite, id string) (checkpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range sp.cps {
		if c.ID == id {
			return c, true
		}
	}
	apiError(w, http.StatusNotFound, "not_found", "checkpoint %q not found", id)
	return checkpoint{}, false
}

func (s *Server) checkpointGet(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	if c, ok := s.findCheckpoint(w, sp, r.PathValue("id")); ok {
		fakecloud.WriteJSON(w, http.StatusOK, c.json())
	}
}

// restore puts a checkpoint back in place: every session's process group
// is killed (the Sprite restarts), the files are replaced, and the first
// reads afterwards fail while listing already works.
func (s *Server) restore(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	c, ok := s.findCheckpoint(w, sp, r.PathValue("id"))
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	writeNDJSON(w, map[string]string{"type": "info", "data": "Restoring checkpoint " + c.ID})
	s.mu.Lock()
	var procs []*fakecloud.Proc
	for _, ss := range sp.sessions {
		procs = append(procs, ss.p)
	}
	s.mu.Unlock()
	for _, p := range procs {
		if p.PID() > 0 && !p.Exited() {
			_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		}
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(5 * time.Second):
		}
	}
	for _, d := range []string{"workspace", "home"} {
		target := filepath.Join(sp.sb.Dir, d)
		des, _ := os.ReadDir(target)
		for _, de := range des {
			_ = os.RemoveAll(filepath.Join(target, de.Name()))
		}
		if err := copyTree(filepath.Join(c.dir, d), target); err != nil {
			writeNDJSON(w, map[string]string{"type": "error", "error": err.Error()})
			return
		}
	}
	s.mu.Lock()
	if s.opts.ReadsFailAfterRestore > 0 {
		sp.badReads = s.opts.ReadsFailAfterRestore
	}
	s.mu.Unlock()
	writeNDJSON(w, map[string]string{"type": "info", "data": "Restored to " + c.ID})
	writeNDJSON(w, map[string]string{"type": "complete", "data": c.ID})
}
