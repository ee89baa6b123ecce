package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
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
// line; the ratio is gateway ns/op over direct ns/op.
func BenchmarkStream50MB(b *testing.B) {
	const key = "real-key"
	up := httptest.NewServer(streamer(key))
	defer up.Close()
	k := newRelayKit(b, up, 0)
	for _, c := range []struct{ name, url, key string }{
		{"direct", up.URL, key},
		{"gateway", k.route, k.ph},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(streamBytes)
			for b.Loop() {
				req, _ := http.NewRequest("GET", c.url+"/v1/stream", nil)
				req.Header.Set("x-api-key", c.key)
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
		})
	}
}
