package e2bfake

import (
	"io"
	"net/http"
	"sync/atomic"
)

// byteCount counts the body bytes the fake received and sent (headers
// not counted), for comparing corral's traffic with the SDK's.
type byteCount struct{ in, out atomic.Int64 }

// Bytes returns the request and response body bytes of every API and
// envd call so far.
func (f *Fake) Bytes() (in, out int64) { return f.bytes.in.Load(), f.bytes.out.Load() }

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// countingWriter counts what is written and keeps streaming working
// (Connect needs Flush).
type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(n))
	return n, err
}

func (w countingWriter) Flush() {
	if fl, ok := w.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (w countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// counted wraps h so its bodies are counted.
func (f *Fake) counted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			r.Body = countingBody{r.Body, &f.bytes.in}
		}
		h(countingWriter{w, &f.bytes.out}, r)
	}
}
