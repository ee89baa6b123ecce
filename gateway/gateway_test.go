package gateway_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestHeaderModes checks where each broker mode puts the value, and that a
// placeholder in any other header is refused, with an upstream that echoes
// what it received.
func TestHeaderModes(t *testing.T) {
	const value = "real-value-42"
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	t.Cleanup(up.Close)
	for _, tt := range []struct {
		name, mode, header string
		send               func(ph string) string
		want               string // the header's value upstream; "" for a 403
	}{
		{"x-api-key", "x-api-key", "X-Api-Key", func(ph string) string { return ph }, value},
		{"bearer", "bearer", "Authorization", func(ph string) string { return "Bearer " + ph }, "Bearer " + value},
		{"basic", "basic", "Authorization", func(ph string) string { return "Basic " + b64("x-access-token:"+ph) }, "Basic " + b64("x-access-token:"+value)},
		{"bearer in the wrong header", "bearer", "X-Other", func(ph string) string { return ph }, ""},
		{"x-api-key sent as bearer", "x-api-key", "Authorization", func(ph string) string { return "Bearer " + ph }, ""},
		{"basic sent raw", "basic", "Authorization", func(ph string) string { return "Bearer " + ph }, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got = nil
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			secrets, _ := sandbox.NewSecrets(map[string]string{"K": value})
			secrets, err := secrets.WithBrokers(map[string]sandbox.Broker{"K": {Hosts: []string{up.URL}, Header: tt.mode}})
			if err != nil {
				t.Fatal(err)
			}
			def := &sandbox.Definition{ID: "d", Workspace: &sandbox.Workspace{Secrets: secrets}}
			rec := store.Run{ID: "r1", ThreadID: "t", DefinitionID: "d", Status: store.RunRunning, JournalNonce: "n", SandboxKey: "k"}
			if err := st.CreateRun(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			g, err := gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st, Reach: map[string]string{"local": "http://gw"},
				Definition: func(string) (*sandbox.Definition, bool) { return def, true }})
			if err != nil {
				t.Fatal(err)
			}
			route, _ := g.BaseURL("local", rec.ID, up.URL)
			req := httptest.NewRequest("POST", strings.TrimPrefix(route, "http://gw")+"/v1/x?q=1", strings.NewReader("{}")) // origin-form, as a server reads it
			req.Header.Set(tt.header, tt.send(g.Placeholder(rec, "K")))
			w := httptest.NewRecorder()
			g.ServeHTTP(w, req)
			if tt.want == "" {
				if w.Code != http.StatusForbidden || got != nil {
					t.Fatalf("status %d (upstream reached: %v), want 403", w.Code, got != nil)
				}
				return
			}
			if w.Code != http.StatusOK || got == nil {
				t.Fatalf("status %d: %s", w.Code, w.Body.String())
			}
			if v := got.Get(tt.header); v != tt.want {
				t.Errorf("upstream got %s: %q, want %q", tt.header, v, tt.want)
			}
			for k, vs := range got {
				if strings.Contains(strings.Join(vs, " "), "corral-ph1.") {
					t.Errorf("upstream header %s still holds the placeholder", k)
				}
			}
		})
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestLoadOrCreateKey(t *testing.T) {
	path := t.TempDir() + "/sub/gateway.key"
	k1, err := gateway.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := gateway.LoadOrCreateKey(path)
	if err != nil || string(k1) != string(k2) || len(k1) != gateway.KeySize {
		t.Fatalf("second load: %v (same %v, %d bytes)", err, string(k1) == string(k2), len(k1))
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", fi.Mode(), err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.LoadOrCreateKey(path); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("a bad key file: %v", err)
	}
}

// TestPublicURL: a provider the gateway has no address for gets routes at
// the URL the user exposes it at, and none without one.
func TestPublicURL(t *testing.T) {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	for _, tt := range []struct{ public, want string }{
		{"", ""},
		{"https://gw.example.test/", "https://gw.example.test/r/"},
	} {
		g, err := gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st, Reach: map[string]string{"local": "http://127.0.0.1:1"}, PublicURL: tt.public,
			Definition: func(string) (*sandbox.Definition, bool) { return nil, false }})
		if err != nil {
			t.Fatal(err)
		}
		u, err := g.BaseURL("e2b", "run-1", "api.anthropic.com")
		if tt.want == "" {
			if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
				t.Errorf("no public URL: %q, %v", u, err)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(u, tt.want) || !strings.HasSuffix(u, "/https/api.anthropic.com") {
			t.Errorf("public URL %s: %q, %v", tt.public, u, err)
		}
	}
}
