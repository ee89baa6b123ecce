package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// egressAgent tries, from inside the container: plain HTTP and CONNECT
// through the proxy to the allowed and the refused host, the proxy
// without credentials, and a direct connection that bypasses the proxy.
const egressAgent = `p=${HTTP_PROXY#http://}; cred=${p%@*}; addr=${p#*@}; host=${addr%:*}; port=${addr##*:}
auth=$(printf '%s' "$cred" | base64 | tr -d '\n')
get() { printf 'GET http://%s/ HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\nConnection: close\r\n\r\n' "$1" "$1" "$2" | nc -w 5 "$host" "$port" | tr -d '\r' | sed -n '1p;$p' | tr '\n' ' '; }
connect() { printf 'CONNECT %s:80 HTTP/1.1\r\nHost: %s:80\r\nProxy-Authorization: Basic %s\r\n\r\nGET / HTTP/1.0\r\nHost: %s\r\n\r\n' "$1" "$1" "$auth" "$1" | nc -w 5 "$host" "$port" | tr -d '\r' | sed -n '1p;$p' | tr '\n' ' '; }
echo "plain-allowed: $(get allowed.test "$auth")"
echo "plain-denied: $(get denied.test "$auth")"
echo "plain-noauth: $(get allowed.test bm9wZTpub3Bl)"
echo "connect-allowed: $(connect allowed.test)"
echo "connect-denied: $(connect denied.test)"
echo "dns-allowed: $(nslookup -timeout=2 -retry=1 allowed.test 2>&1 | grep -c 192.0.2.10)"
echo "dns-denied: $(nslookup -timeout=2 -retry=1 denied.test >/dev/null 2>&1 && echo answered || echo failed)"
echo "direct: [$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 1.1.1.1 80 2>&1 | head -c 100)]"
echo "host-service: [$(printf 'hello\n' | nc -w 2 "$host" "$HOST_SERVICE_PORT" 2>&1 | head -c 100)]"
`

// TestEgressAllowListDocker puts a container under policy.network.allow:
// [allowed.test] on Docker's internal egress network. Two stand-in
// "internet" servers run on loopback; the gateway's dialer resolves the
// two names to them. Through the gateway the allowed one answers (plain
// HTTP and CONNECT), the other is refused with 403, the proxy without the
// run's credentials with 407, every attempt is recorded, and a direct
// connection past the gateway goes nowhere. DNS answers the listed name
// only (the gateway's DNS on the egress network), each query an event.
func TestEgressAllowListDocker(t *testing.T) {
	_, p := dockerBridge(t)
	ctx := ctxT(t)
	egressIP, err := p.EgressGateway(ctx)
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]string{}
	for _, name := range []string{"allowed.test", "denied.test"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "body-of-%s", name) }))
		t.Cleanup(srv.Close)
		servers[name+":80"] = srv.Listener.Addr().String()
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		if a, ok := servers[addr]; ok {
			addr = a
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	def := &sandbox.Definition{ID: "eg", Provider: sandbox.Guard(p, sandbox.GuardOptions{}),
		Policy: &sandbox.Policy{Egress: []string{"allowed.test"}, Default: sandbox.Allow}}
	// A host service listening on all addresses, as databases and dev
	// servers do: reachable at the egress network's gateway address
	// unless the host fences the network off (FenceEgressHost).
	hostSvc, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hostSvc.Close() })
	go func() {
		for {
			c, err := hostSvc.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("host-service-answered\n"))
			c.Close()
		}
	}()
	_, hostPort, _ := net.SplitHostPort(hostSvc.Addr().String())
	k := newKitDial(t, def, map[string]string{"egress:docker": egressIP + ":0", "dns:docker": egressIP + ":53"}, dial, nil)
	if k.fenceErr != nil {
		testutil.Unavailable(t, "the egress network's host fence: "+k.fenceErr.Error())
	}
	rec, text := k.complete(t, run.StartRequest{Definition: "eg", Thread: "th-egress", Harness: command.Name, Args: []string{"sh", "-c", egressAgent},
		Env: map[string]string{"HOST_SERVICE_PORT": hostPort}})
	t.Logf("agent:\n%s", text)
	for _, want := range []string{
		"plain-allowed: HTTP/1.1 200 OK body-of-allowed.test",
		"plain-denied: HTTP/1.1 403",
		"plain-noauth: HTTP/1.1 407",
		"connect-allowed: HTTP/1.1 200 Connection established body-of-allowed.test",
		"connect-denied: HTTP/1.1 403",
		"dns-allowed: 1", // the listed name resolves
		"dns-denied: failed",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the agent's output lacks %q", want)
		}
	}
	if d := text[strings.Index(text, "direct: "):]; strings.Contains(d, "HTTP") {
		t.Errorf("a direct connection past the gateway answered: %s", d)
	}
	if strings.Contains(text, "body-of-denied") {
		t.Error("the refused host answered")
	}
	if strings.Contains(text, "host-service-answered") {
		t.Error("a host service listening on all addresses answered the sandbox at the egress network's gateway address")
	}
	var allowed, refused []string
	for len(k.recs) > 0 {
		r := <-k.recs
		if r.Kind != "egress" || r.Method == "DNS" { // DNS: below, as events
			continue
		}
		if r.Refused == "" {
			allowed = append(allowed, r.Method+" "+r.Host)
		} else {
			refused = append(refused, r.Method+" "+r.Host)
		}
	}
	if strings.Join(allowed, ",") != "GET allowed.test:80,CONNECT allowed.test:80" || len(refused) != 3 {
		t.Errorf("records: allowed %v, refused %v", allowed, refused)
	}
	// The attempts with the run's credentials are run events.
	evs, err := k.st.ReadEvents(ctx, rec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var attempts []string
	dns := map[string]bool{}
	for _, e := range evs {
		ev, _ := event.Unmarshal(e.Data)
		if ev.Type == event.Custom && ev.Name == event.EgressAttempt {
			var a event.Egress
			_ = json.Unmarshal(ev.Value, &a)
			if a.Method == "DNS" { // one per query type, A and AAAA
				dns[fmt.Sprintf("%s %v", a.Host, a.Allowed)] = true
				continue
			}
			attempts = append(attempts, fmt.Sprintf("%s %s %v %d", a.Method, a.Host, a.Allowed, a.Status))
		}
	}
	if len(dns) != 2 || !dns["allowed.test true"] || !dns["denied.test false"] {
		t.Errorf("DNS egress.attempt events: %v, want allowed.test answered and denied.test refused", dns)
	}
	// The one without (407) too: its source address names the container.
	want := "GET allowed.test:80 true 200,GET denied.test:80 false 403,GET allowed.test:80 false 407,CONNECT allowed.test:80 true 200,CONNECT denied.test:80 false 403"
	if strings.Join(attempts, ",") != want {
		t.Errorf("egress.attempt events:\n%s\nwant\n%s", strings.Join(attempts, ","), want)
	}
}

// TestEgressAllowListRefusedWhereUnenforced: the local provider cannot
// keep a sandbox off the network, so a run under an allow-list is refused
// at start rather than run open.
func TestEgressAllowListRefusedWhereUnenforced(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "l", Provider: p, Policy: &sandbox.Policy{Egress: []string{"allowed.test"}, Default: sandbox.Allow}}
	k := newKit(t, def, nil)
	_, err = k.r.Start(ctxT(t), run.StartRequest{Definition: "l", Harness: command.Name, Args: []string{"true"}})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "cannot enforce an egress allow-list") {
		t.Fatalf("start: %v, want FailedPrecondition naming the allow-list", err)
	}
}
