package fakecloud

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"
)

// Fault is a misbehaviour of one route, for a bounded number of requests.
type Fault struct {
	// Status answers the request with this status and an error body
	// instead of handling it (a 429 burst, a 503). With Accept the request
	// is handled first.
	Status int
	// RetryAfter is sent as the Retry-After header with Status.
	RetryAfter string
	// Accept handles the request (the sandbox is made) and then throws its
	// answer away and answers Status: a create that succeeded and answered
	// 504.
	Accept bool
	// Delay holds the request this long before anything else (or until the
	// client goes away).
	Delay time.Duration
	// DropAfter, for a streaming route, drops the socket once this many
	// bytes of output were sent (the handler asks StreamFault).
	DropAfter int
	// Times is how many requests the fault applies to. Default 1.
	Times int
}

// Injected is a fault added to a route; it counts the requests it hit.
type Injected struct {
	f     Fault
	left  atomic.Int64
	hits  atomic.Int64
	drops atomic.Int64
}

// Hits returns how many requests the fault has hit.
func (i *Injected) Hits() int { return int(i.hits.Load()) }

// Drops returns how many streams a DropAfter fault has dropped (a stream
// shorter than DropAfter is hit but not dropped).
func (i *Injected) Drops() int { return int(i.drops.Load()) }

// Inject adds f to route. Faults of one route apply in the order they
// were added, each to its Times requests.
func (s *Server) Inject(route string, f Fault) *Injected {
	if f.Times <= 0 {
		f.Times = 1
	}
	in := &Injected{f: f}
	in.left.Store(int64(f.Times))
	s.mu.Lock()
	s.faults[route] = append(s.faults[route], in)
	s.mu.Unlock()
	return in
}

// take returns the route's next fault with requests left, spending one.
func (s *Server) take(route string) *Injected {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.faults[route] {
		if in.left.Load() > 0 {
			in.left.Add(-1)
			in.hits.Add(1)
			return in
		}
	}
	return nil
}

type faultKey struct{}

// StreamFault returns the byte count after which a streaming handler must
// drop its socket for this request, and false when no such fault applies.
func StreamFault(ctx context.Context) (dropAfter int, ok bool) {
	in, _ := ctx.Value(faultKey{}).(*Injected)
	if in == nil || in.f.DropAfter <= 0 {
		return 0, false
	}
	return in.f.DropAfter, true
}

// NoteDrop counts a stream dropped by the request's DropAfter fault.
func NoteDrop(ctx context.Context) {
	if in, _ := ctx.Value(faultKey{}).(*Injected); in != nil {
		in.drops.Add(1)
	}
}

// serve runs h under the route's next fault, if any.
func (s *Server) serve(route string, w http.ResponseWriter, r *http.Request, h http.HandlerFunc) {
	in := s.take(route)
	if in == nil {
		h(w, r)
		return
	}
	f := in.f
	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if f.Status > 0 && f.Accept {
		rec := httptest.NewRecorder()
		h(rec, r) // done, and its answer lost
		s.answerFault(w, f)
		return
	}
	if f.Status > 0 {
		s.answerFault(w, f)
		return
	}
	h(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, in)))
}

func (s *Server) answerFault(w http.ResponseWriter, f Fault) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	WriteError(w, f.Status, "injected fault: %s", http.StatusText(f.Status))
}
