package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

const streamBytes = 50 << 20

// streamer answers with streamBytes in 32 KiB writes, each flushed (a
// model's long stream), if the key is right.
func streamer(key string) http.Handler {
	chunk := make([]byte, 32<<10)
	for i := range chunk {
		chunk[i] = 'a' + byte(i%26)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for sent := 0; sent < streamBytes; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			f.Flush()
		}
	})
}

// BenchmarkStream50MB reads a streamed 50 MB response directly from the
// upstream (the floor) and through the gateway (placeholder check, store
// lookup, swap, the relay's splice: relay.go). Each side prints its own
// line (the ratio is gateway ns/op over direct ns/op), and "alternating"
// interleaves them and reports the ratio itself.
func BenchmarkStream50MB(b *testing.B) {
	const key = "real-key"
	up := httptest.NewServer(streamer(key))
	defer up.Close()
	k := newRelayKit(b, up, 0)
	fetch := func(b *testing.B, url, key string) {
		req, _ := http.NewRequest("GET", url+"/v1/stream", nil)
		req.Header.Set("x-api-key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != streamBytes || resp.StatusCode != 200 {
			b.Fatalf("status %d, %d bytes, %v", resp.StatusCode, n, err)
		}
	}
	for _, c := range []struct{ name, url, key string }{
		{"direct", up.URL, key},
		{"gateway", k.route, k.ph},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(streamBytes)
			for b.Loop() {
				fetch(b, c.url, c.key)
			}
		})
	}
	// alternating: a direct read and a gateway read in each iteration, so
	// both see the same machine load; it reports each side's mean and
	// their ratio (a measurement, not a verdict).
	b.Run("alternating", func(b *testing.B) {
		b.SetBytes(2 * streamBytes)
		var direct, through time.Duration
		for b.Loop() {
			t0 := time.Now()
			fetch(b, up.URL, key)
			t1 := time.Now()
			fetch(b, k.route, k.ph)
			direct, through = direct+t1.Sub(t0), through+time.Since(t1)
		}
		n := float64(b.N)
		b.ReportMetric(float64(direct.Milliseconds())/n, "direct-ms/op")
		b.ReportMetric(float64(through.Milliseconds())/n, "gateway-ms/op")
		b.ReportMetric(float64(through)/float64(direct), "ratio")
	})
}
