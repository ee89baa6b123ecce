package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// relayKit (also the benchmark's) is a gateway served by an http.Server (so the relay's hijack
// works) in front of up, with one live run whose secret K is brokered to
// up in x-api-key.
type relayKit struct {
	g     *gateway.Gateway
	route string
	ph    string
	recs  chan gateway.Record
}

// liveRun is a memory store holding one live run (definition "d").
func liveRun(t testing.TB, id string) (store.Store, store.Run) {
	t.Helper()
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	rec := store.Run{ID: id, ThreadID: "t", DefinitionID: "d", Status: store.RunRunning, JournalNonce: "n", SandboxKey: "k"}
	if err := st.CreateRun(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return st, rec
}

func newRelayKit(t testing.TB, up *httptest.Server, maxResp int64) *relayKit {
	t.Helper()
	st, rec := liveRun(t, "run-relay")
	secrets, _ := sandbox.NewSecrets(map[string]string{"K": "real-key"})
	secrets, _ = secrets.WithBrokers(map[string]sandbox.Broker{"K": {Hosts: []string{up.URL}, Header: "x-api-key"}})
	def := &sandbox.Definition{ID: "d", Workspace: &sandbox.Workspace{Secrets: secrets}}
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	k := &relayKit{recs: make(chan gateway.Record, 100)}
	g, err := gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st, Reach: map[string]string{"local": srv.URL}, MaxResponseBytes: maxResp,
		Definition: func(string) (*sandbox.Definition, bool) { return def, true },
		OnRequest: func(r gateway.Record) {
			select {
			case k.recs <- r:
			default: // a benchmark does not read them
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = g
	k.g, k.ph = g, g.Placeholder(rec, "K")
	k.route, _ = g.BaseURL("local", rec.ID, up.URL)
	return k
}

func (k *relayKit) do(t *testing.T, method, path, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, k.route+path, strings.NewReader(body))
	req.Header.Set("x-api-key", k.ph)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestRelayFraming checks the relay's answers for each framing an
// upstream uses: the body arrives whole, the header is relayed without
// hop-by-hop fields, the Record counts the body, and a second request on
// the same client works (the relay closes the agent's connection).
func TestRelayFraming(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != "real-key" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		in, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", string(in))
		w.Header().Set("Keep-Alive", "timeout=5")
		switch r.URL.Path {
		case "/length":
			w.Header().Set("Content-Length", "5")
			_, _ = io.WriteString(w, "hello")
		case "/chunked":
			for i := range 3 {
				_, _ = io.WriteString(w, "part"+strconv.Itoa(i))
				w.(http.Flusher).Flush()
			}
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	t.Cleanup(up.Close)
	k := newRelayKit(t, up, 0)
	for _, tt := range []struct {
		method, path, want string
		status             int
	}{
		{"POST", "/length", "hello", 200},
		{"POST", "/chunked", "part0part1part2", 200},
		{"POST", "/empty", "", 204},
		{"HEAD", "/length", "", 200},
		{"POST", "/length", "hello", 200}, // again: a fresh connection
	} {
		t.Run(tt.method+tt.path, func(t *testing.T) {
			resp := k.do(t, tt.method, tt.path, `{"q":1}`)
			got, err := io.ReadAll(resp.Body)
			if err != nil || string(got) != tt.want || resp.StatusCode != tt.status {
				t.Fatalf("status %d body %q (%v), want %d %q", resp.StatusCode, got, err, tt.status, tt.want)
			}
			if tt.method == "POST" && resp.Header.Get("X-Seen") != `{"q":1}` {
				t.Errorf("upstream saw body %q", resp.Header.Get("X-Seen"))
			}
			if resp.Header.Get("Keep-Alive") != "" {
				t.Error("hop-by-hop Keep-Alive relayed")
			}
			r := <-k.recs
			if r.Status != tt.status || r.Refused != "" || (tt.want != "" && r.Bytes < int64(len(tt.want))) {
				t.Errorf("record %+v", r)
			}
		})
	}
}

// TestRelayStreamsAndBounds checks that a relayed body arrives while the
// upstream is still writing, and that a body past MaxResponseBytes is cut.
func TestRelayStreamsAndBounds(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/stream":
			_, _ = io.WriteString(w, "first")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-time.After(time.Minute): // hang guard
			}
			_, _ = io.WriteString(w, "second")
		case "/big":
			w.Header().Set("Content-Length", strconv.Itoa(1<<20))
			_, _ = w.Write(make([]byte, 1<<20))
		}
	}))
	t.Cleanup(up.Close)
	k := newRelayKit(t, up, 64<<10)
	resp := k.do(t, "GET", "/stream", "")
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "first" {
		t.Fatalf("first part before the upstream finished: %q %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second" {
		t.Fatalf("rest %q", rest)
	}
	<-k.recs
	resp = k.do(t, "GET", "/big", "")
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n > 64<<10 {
		t.Fatalf("a 1 MiB body through a 64 KiB bound: %d bytes, %v", n, err)
	}
	if r := <-k.recs; r.Bytes > 64<<10 {
		t.Errorf("record counts %d bytes", r.Bytes)
	}
}
