package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
)

// checkpointItem is a checkpoint as the API lists it: without its entries
// (GET …/checkpoints/{id} has them), with whether it is the head.
type checkpointItem struct {
	store.Checkpoint
	Head bool `json:"head"`
}

// listCheckpoints serves GET /v1/threads/{thread}/checkpoints.
func (s *Server) listCheckpoints(w http.ResponseWriter, r *http.Request) {
	cps, head, err := s.opts.Runner.Checkpoints(r.Context(), tenantOf(r), r.PathValue("thread"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, checkpointItems(cps, head))
}

// checkpointItems lists cps without their entries, marking the head.
func checkpointItems(cps []store.Checkpoint, head string) []checkpointItem {
	items := make([]checkpointItem, len(cps))
	for i, cp := range cps {
		cp.Entries = nil
		items[i] = checkpointItem{cp, cp.ID == head}
	}
	return items
}

// getCheckpoint serves GET /v1/threads/{thread}/checkpoints/{id}, entries
// included.
func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	cp, err := s.st.GetCheckpoint(r.Context(), tenantOf(r), r.PathValue("thread"), r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, cp)
}

// decodeBody decodes a small JSON body strictly; an empty body is the zero
// value.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, v any, what string) bool {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		s.fail(w, r, badRequest("the body is not %s: %v", what, err))
		return false
	}
	return true
}

// saveCheckpoint serves POST /v1/threads/{thread}/checkpoints.
func (s *Server) saveCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req api.SaveCheckpoint
	if !s.decodeBody(w, r, &req, `a checkpoint request ({"label":…})`) {
		return
	}
	res, err := s.opts.Runner.Save(context.WithoutCancel(r.Context()), run.SaveCheckpoint{Tenant: tenantOf(r), Thread: r.PathValue("thread"), Label: req.Label})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res.Checkpoint.Entries = nil
	writeJSON(w, http.StatusCreated, res)
}

// forkThread serves POST /v1/threads/{thread}/fork.
func (s *Server) forkThread(w http.ResponseWriter, r *http.Request) {
	var req api.ForkThread
	if !s.decodeBody(w, r, &req, `a fork request ({"checkpoint":…,"thread":…})`) {
		return
	}
	cp, err := s.opts.Runner.Fork(context.WithoutCancel(r.Context()), tenantOf(r), r.PathValue("thread"), req.Checkpoint, req.Thread)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cp.Entries = nil
	writeJSON(w, http.StatusCreated, cp)
}

// restoreCheckpoint serves POST /v1/threads/{thread}/restore.
func (s *Server) restoreCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req api.RestoreCheckpoint
	if !s.decodeBody(w, r, &req, `a restore request ({"checkpoint":…})`) {
		return
	}
	res, err := s.opts.Runner.RestoreCheckpoint(context.WithoutCancel(r.Context()), tenantOf(r), r.PathValue("thread"), req.Checkpoint, nil)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
