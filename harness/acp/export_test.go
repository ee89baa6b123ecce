package acp

import "errors"

// Abandon makes this process's client of a run vanish as if its process
// died: its helper processes are killed and it writes nothing more, to the
// journal or the run's directory. It reports whether there was a session.
func (h *Harness) Abandon(runID string) bool {
	h.mu.Lock()
	s := h.sessions[runID]
	h.mu.Unlock()
	if s == nil {
		return false
	}
	s.abandoned.Store(true)
	s.input.dead.Store(true)
	s.jw.mu.Lock()
	s.jw.err = errors.New("abandoned")
	s.jw.mu.Unlock()
	s.killHelpers()
	s.cancel()
	<-s.done
	return true
}
