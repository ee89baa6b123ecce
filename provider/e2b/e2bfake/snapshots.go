package e2bfake

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/e2b"
)

// takeSnapshot copies the sandbox's files into a new snapshot.
func (f *Fake) takeSnapshot(id string, sb *sandbox, name string) (*snapshot, error) {
	raw := token("")[:20]
	s := &snapshot{id: raw + ":default", names: []string{}, from: id, created: time.Now().UTC()}
	if name != "" {
		s.id = "fake-team/" + name + ":default"
		s.names = []string{s.id}
	}
	dir, err := os.MkdirTemp(f.snapDir(), "snap-")
	if err != nil {
		return nil, err
	}
	s.dir = dir
	for _, d := range []string{"home", "workspace"} {
		if err := os.Mkdir(dir+"/"+d, 0o755); err != nil {
			return nil, err
		}
		if out, err := exec.Command("cp", "-a", sb.fc.Dir+"/"+d+"/.", dir+"/"+d+"/").CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%v: %s", err, out)
		}
	}
	f.mu.Lock()
	f.snaps[s.id] = s
	f.mu.Unlock()
	return s, nil
}

func (f *Fake) snapDir() string {
	d := f.opts.BaseDir
	if d == "" {
		d = os.TempDir()
	}
	_ = os.MkdirAll(d, 0o755)
	return d
}

func (f *Fake) snapshot(w http.ResponseWriter, r *http.Request) {
	id, sb, ok := f.lookup(w, r)
	if !ok {
		return
	}
	var req e2b.SnapshotRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s, err := f.takeSnapshot(id, sb, req.Name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusCreated, e2b.SnapshotInfo{SnapshotID: s.id, Names: s.names})
}

func (f *Fake) listSnapshots(w http.ResponseWriter, r *http.Request) {
	from := r.URL.Query().Get("sandboxID")
	f.mu.Lock()
	var list []*snapshot
	for _, s := range f.snaps {
		if from == "" || s.from == from {
			list = append(list, s)
		}
	}
	f.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].created.After(list[j].created) })
	out := []e2b.SnapshotInfo{}
	for _, s := range list {
		out = append(out, e2b.SnapshotInfo{SnapshotID: s.id, Names: s.names})
	}
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *Fake) deleteTemplate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f.mu.Lock()
	s, ok := f.template(id)
	if ok && s != nil {
		delete(f.snaps, s.id)
	}
	f.mu.Unlock()
	if !ok || s == nil {
		writeError(w, http.StatusNotFound, "template '%s' not found", id)
		return
	}
	_ = os.RemoveAll(s.dir)
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) fork(w http.ResponseWriter, r *http.Request) {
	id, sb, ok := f.lookup(w, r)
	if !ok {
		return
	}
	var req e2b.ForkRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Timeout == 0 {
		req.Timeout = 15
	}
	s, err := f.takeSnapshot(id, sb, "")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	defer func() {
		f.mu.Lock()
		delete(f.snaps, s.id)
		f.mu.Unlock()
		_ = os.RemoveAll(s.dir)
	}()
	f.mu.Lock()
	meta, env, tmpl := maps.Clone(sb.metadata), maps.Clone(sb.envVars), sb.template
	f.mu.Unlock()
	var out []e2b.ForkResult
	for range req.Count {
		nid, nsb, err := f.newSandbox(tmpl, req.Timeout, meta, env, s)
		if err != nil {
			out = append(out, e2b.ForkResult{Error: &e2b.ErrorBody{Code: 500, Message: err.Error()}})
			continue
		}
		wire := f.wire(nid, nsb)
		out = append(out, e2b.ForkResult{Sandbox: &wire})
	}
	fakecloud.WriteJSON(w, http.StatusCreated, out)
}
