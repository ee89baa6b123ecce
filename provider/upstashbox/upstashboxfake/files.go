package upstashboxfake

import (
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/upstashbox"
)

// hostPath maps a path of the box to the host: /workspace/home is the
// workspace, a relative path is under it, another absolute path is itself.
func hostPath(b *box, p string) string {
	switch {
	case p == "" || p == ".":
		return b.fc.Root
	case p == Workspace || strings.HasPrefix(p, Workspace+"/"):
		return filepath.Join(b.fc.Root, strings.TrimPrefix(p, Workspace))
	case path.IsAbs(p):
		return filepath.Clean(p)
	}
	return filepath.Join(b.fc.Root, p)
}

func (f *Fake) readFile(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	p := hostPath(b, q.Get("path"))
	fi, err := os.Stat(p)
	if err != nil {
		writeError(w, http.StatusNotFound, "file not found: %s", q.Get("path"))
		return
	}
	if fi.IsDir() {
		writeError(w, http.StatusBadRequest, "path is a directory: %s", q.Get("path"))
		return
	}
	data, err := os.ReadFile(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "reading the file: %v", err)
		return
	}
	content := string(data)
	if q.Get("encoding") == "base64" {
		content = base64.StdEncoding.EncodeToString(data)
	}
	fakecloud.WriteJSON(w, http.StatusOK, upstashbox.FileContent{Content: content})
}

func (f *Fake) writeFile(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	var req upstashbox.WriteFile
	if !decode(w, r, &req) {
		return
	}
	data := []byte(req.Content)
	switch req.Encoding {
	case "", "utf8", "utf-8":
	case "base64":
		d, err := base64.StdEncoding.DecodeString(req.Content)
		if err != nil {
			writeError(w, http.StatusBadRequest, "content is not base64")
			return
		}
		data = d
	default:
		writeError(w, http.StatusBadRequest, "invalid encoding %q", req.Encoding)
		return
	}
	p := hostPath(b, req.Path)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		writeError(w, http.StatusBadRequest, "creating the parent: %v", err)
		return
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		writeError(w, http.StatusBadRequest, "writing the file: %v", err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "file written"})
}

func (f *Fake) listFiles(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	folder := r.URL.Query().Get("folder")
	dir := hostPath(b, folder)
	ents, err := os.ReadDir(dir)
	if err != nil {
		writeError(w, http.StatusNotFound, "folder not found: %s", folder)
		return
	}
	shown := folder
	if shown == "" {
		shown = Workspace
	} else if !path.IsAbs(shown) {
		shown = path.Join(Workspace, shown)
	}
	out := upstashbox.FileList{Files: []upstashbox.FileEntry{}}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out.Files = append(out.Files, upstashbox.FileEntry{Name: e.Name(), Path: path.Join(shown, e.Name()), Size: fi.Size(),
			IsDir: e.IsDir(), ModTime: fi.ModTime().UTC().Format(time.RFC3339)})
	}
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *Fake) snapshot(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	var req struct {
		Name string `json:"name"`
	}
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" {
		writeError(w, http.StatusBadRequest, "name is required")
		return
	}
	id := newID("snap_")
	dir := filepath.Join(f.snapDir, id)
	if err := copyTree(b.fc.Root, dir); err != nil {
		writeError(w, http.StatusInternalServerError, "snapshot failed: %v", err)
		return
	}
	var size int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return nil
	})
	sn := &snapshot{dir: dir, data: upstashbox.Snapshot{ID: id, Name: req.Name, BoxID: b.fc.ID, SizeBytes: size,
		Status: "creating", CreatedAt: time.Now().Unix()}}
	f.mu.Lock()
	f.snaps[id] = sn
	out := sn.data
	sn.data.Status = "ready" // listed as ready from now on
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *Fake) listSnapshots(w http.ResponseWriter, r *http.Request) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	out := upstashbox.SnapshotList{Snapshots: []upstashbox.Snapshot{}}
	f.mu.Lock()
	for _, s := range f.snaps {
		if s.data.BoxID == b.fc.ID {
			out.Snapshots = append(out.Snapshots, s.data)
		}
	}
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

// deleteSnapshot deletes a snapshot; the box in the path need not live
// (snapshots outlive their box) but must be the snapshot's.
func (f *Fake) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	sid := r.PathValue("sid")
	f.mu.Lock()
	s, ok := f.snaps[sid]
	if ok && s.data.BoxID != r.PathValue("id") {
		ok = false
	}
	if ok {
		delete(f.snaps, sid)
	}
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	_ = os.RemoveAll(s.dir)
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "snapshot deleted"})
}

// copyTree copies the regular files, directories and links under src to
// dst, keeping modes.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case d.Type().IsRegular():
			in, err := os.Open(p)
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fi.Mode().Perm())
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, in); err != nil {
				out.Close()
				return err
			}
			return out.Close()
		}
		return nil
	})
}
