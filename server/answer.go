package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/d10ffeed/corral/api"
)

// answerApproval answers an approval request while the run's turn waits
// for it (run.Runner.Answer): any replica can, whichever drives the run.
func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	rec, err := s.run(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	var a api.Answer
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		s.fail(w, r, badRequest("the body is not an approval answer ({\"approvalId\":…,\"allow\":true|false}): %v", err))
		return
	}
	if strings.TrimSpace(a.ApprovalID) == "" {
		s.fail(w, r, badRequest("approvalId is empty"))
		return
	}
	if err := s.opts.Runner.Answer(context.WithoutCancel(r.Context()), rec.ID, a.ApprovalID, a.Allow); err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, a)
}
