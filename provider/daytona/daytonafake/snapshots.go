package daytonafake

import (
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// createSnapshot copies the workspace into a snapshot named as asked;
// the sandbox keeps its state (the real one passes through
// "snapshotting", which the fake completes before it answers).
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request) {
	d, ok := s.find(w, r)
	if !ok {
		return
	}
	var req struct {
		Name          string `json:"name"`
		IncludeMemory bool   `json:"includeMemory"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil || strings.TrimSpace(req.Name) == "" {
		apiError(w, http.StatusBadRequest, "name must be a non-empty string")
		return
	}
	s.mu.Lock()
	for _, sn := range s.snapshots {
		if sn.name == req.Name {
			s.mu.Unlock()
			apiError(w, http.StatusConflict, "Snapshot with name %s already exists", req.Name)
			return
		}
	}
	s.mu.Unlock()
	dir, err := os.MkdirTemp("", "daytonafake-snap-")
	if err == nil {
		err = copyTree(d.sb.Root, dir)
	}
	if err != nil {
		apiError(w, http.StatusInternalServerError, "snapshot failed: %v", err)
		return
	}
	s.mu.Lock()
	sn := &snapshot{id: "snap-" + strconv.FormatInt(time.Now().UnixNano(), 36), name: req.Name, dir: dir, created: time.Now().UTC()}
	s.snapshots[sn.id] = sn
	m := s.dto(d, true)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, m)
}

// snapshotDTO is the part of SnapshotDto the fake models.
func snapshotDTO(org string, sn *snapshot) map[string]any {
	return map[string]any{"id": sn.id, "organizationId": org, "general": false, "name": sn.name,
		"imageName": sn.name, "state": "active", "size": 0.1, "cpu": 1, "gpu": 0, "mem": 1, "disk": 3,
		"createdAt": sn.created.Format(time.RFC3339Nano), "updatedAt": sn.created.Format(time.RFC3339Nano)}
}

// getSnapshot is GET /api/snapshots/{idOrName}.
func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var m map[string]any
	for id, sn := range s.snapshots {
		if id == r.PathValue("id") || sn.name == r.PathValue("id") {
			m = snapshotDTO(s.org, sn)
		}
	}
	s.mu.Unlock()
	if m == nil {
		apiError(w, http.StatusNotFound, "Snapshot with ID or name %s not found", r.PathValue("id"))
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, m)
}

// deleteSnapshot is DELETE /api/snapshots/{id}: by id only (the API's
// parameter is the snapshot's id; a name is a 404).
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	found, ok := s.snapshots[r.PathValue("id")]
	if ok {
		delete(s.snapshots, found.id)
	}
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusNotFound, "Snapshot with ID %s not found", r.PathValue("id"))
		return
	}
	_ = os.RemoveAll(found.dir)
	w.WriteHeader(http.StatusOK)
}

// Snapshots returns the names of the snapshots the fake holds.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, sn := range s.snapshots {
		out = append(out, sn.name)
	}
	sort.Strings(out)
	return out
}
