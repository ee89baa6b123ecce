package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
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
// lookup, swap, flushed proxying).
func BenchmarkStream50MB(b *testing.B) {
	const key = "sk-bench-real-key"
	up := httptest.NewServer(streamer(key))
	defer up.Close()
	st := memstore.New(memstore.Options{})
	defer st.Close()
	secrets, _ := sandbox.NewSecrets(map[string]string{"K": key})
	secrets, _ = secrets.WithBrokers(map[string]sandbox.Broker{"K": {Hosts: []string{up.URL}, Header: "x-api-key"}})
	def := &sandbox.Definition{ID: "d", Workspace: &sandbox.Workspace{Secrets: secrets}}
	rec := store.Run{ID: "run-bench", ThreadID: "t", DefinitionID: "d", Status: store.RunRunning, JournalNonce: "n", SandboxKey: "k"}
	if err := st.CreateRun(context.Background(), rec); err != nil {
		b.Fatal(err)
	}
	gw := httptest.NewServer(nil)
	defer gw.Close()
	g, err := gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st, Reach: map[string]string{"local": gw.URL},
		Definition: func(string) (*sandbox.Definition, bool) { return def, true }})
	if err != nil {
		b.Fatal(err)
	}
	gw.Config.Handler = g
	route, err := g.BaseURL("local", rec.ID, up.URL)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, url, key string }{
		{"direct", up.URL, key},
		{"gateway", route, g.Placeholder(rec, "K")},
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
