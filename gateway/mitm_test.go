package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// TestInterceptHTTPS: a brokered secret with intercept reaches an HTTPS
// host the agent calls by its own URL (no base URL): curl goes through
// the gateway's forward proxy, trusts the sandbox's gateway CA from
// CURL_CA_BUNDLE, and the host, which accepts only the real key over
// real TLS, answers; a CONNECT to another loopback address (the gateway
// host's, which no list names) is refused.
func TestInterceptHTTPS(t *testing.T) {
	key := canary()
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("hello over intercepted TLS"))
	}))
	t.Cleanup(up.Close)
	host := strings.TrimPrefix(up.URL, "https://")
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{"API_TOKEN": key})
	secrets, err = secrets.WithBrokers(map[string]sandbox.Broker{"API_TOKEN": {Hosts: []string{host}, Header: "bearer", Intercept: true}})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "m", Provider: p, Workspace: &sandbox.Workspace{Secrets: secrets}}
	k := newKitDial(t, def, nil, nil, up.Client().Transport)
	agent := `curl -sS -H "Authorization: Bearer $API_TOKEN" "$URL/v1/x"; echo
curl -sS -o /dev/null -w 'other=%{http_code}\n' https://127.0.0.2:1/ 2>&1 | tail -1`
	_, text := k.complete(t, run.StartRequest{Definition: "m", Harness: command.Name, Args: []string{"sh", "-c", agent}, Env: map[string]string{"URL": up.URL}})
	if !strings.Contains(text, "hello over intercepted TLS") {
		t.Fatalf("the intercepted call did not authenticate:\n%s", text)
	}
	if strings.Contains(text, "other=200") {
		t.Errorf("a loopback host of the gateway went through:\n%s", text)
	}
	refused := false
	for len(k.recs) > 0 {
		r := <-k.recs
		refused = refused || (r.Host == "127.0.0.2:1" && strings.Contains(r.Refused, "loopback"))
	}
	if !refused {
		t.Error("the CONNECT to 127.0.0.2:1 was not refused as the gateway host's loopback")
	}
	t.Logf("agent:\n%s", text)
}
