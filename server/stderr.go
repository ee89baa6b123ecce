package server

import (
	"net/http"
	"strconv"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/run"
)

// runStderr returns the end of a run's standard error (run.Runner.Stderr),
// ?max= bytes at most (default and cap run.MaxStderr), secrets redacted.
func (s *Server) runStderr(w http.ResponseWriter, r *http.Request) {
	rec, err := s.run(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	max := run.MaxStderr
	if v := r.URL.Query().Get("max"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > run.MaxStderr {
			s.fail(w, r, badRequest("max must be 1 to %d", run.MaxStderr))
			return
		}
		max = n
	}
	text, err := s.opts.Runner.Stderr(r.Context(), rec.ID, max)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Stderr{Stderr: text})
}
