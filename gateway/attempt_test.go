package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/sandbox"
)

// TestRefusalWithoutCredentials checks that a proxy request without the
// run's credentials (407) is an egress.attempt of the run its source
// address names (Options.Identify), and, with no run found, is counted
// as unattributed instead.
func TestRefusalWithoutCredentials(t *testing.T) {
	st, rec := liveRun(t, "run-407")
	def := &sandbox.Definition{ID: "d", Workspace: &sandbox.Workspace{}}
	for _, tt := range []struct {
		name     string
		identify func(context.Context, string) (string, bool)
		wantRun  string
	}{
		{"identified", func(_ context.Context, ip string) (string, bool) { return rec.ID, ip == "127.0.0.1" }, rec.ID},
		{"unidentified", func(context.Context, string) (string, bool) { return "", false }, ""},
		{"no identify", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var noted []event.Egress
			note := gateway.NoteEgress(func(id string, e event.Egress) bool {
				if id == tt.wantRun {
					noted = append(noted, e)
				}
				return true
			})
			g, err := gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st, Identify: tt.identify, OnRequest: note,
				Definition: func(string) (*sandbox.Definition, bool) { return def, true }})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(g.Forward())
			t.Cleanup(srv.Close)
			pu, _ := url.Parse(srv.URL)
			c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
			resp, err := c.Get("http://allowed.test/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusProxyAuthRequired {
				t.Fatalf("status %d, want 407", resp.StatusCode)
			}
			wantNoted, wantCounted := 1, uint64(0)
			if tt.wantRun == "" {
				wantNoted, wantCounted = 0, 1
			}
			if len(noted) != wantNoted || g.Unattributed() != wantCounted {
				t.Fatalf("events %+v, unattributed %d; want %d events, %d unattributed", noted, g.Unattributed(), wantNoted, wantCounted)
			}
			if wantNoted == 1 && (noted[0].Allowed || noted[0].Status != http.StatusProxyAuthRequired || noted[0].Host != "allowed.test:80") {
				t.Errorf("event %+v", noted[0])
			}
		})
	}
}
