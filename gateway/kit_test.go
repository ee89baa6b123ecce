package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// kit is a runner whose Broker is a gateway on loopback, over a SQLite
// store in a file (so a test can read every byte the store wrote).
type kit struct {
	r      *run.Runner
	g      *gateway.Gateway
	st     store.Store
	dbPath string
	url    string // the gateway's base URL on loopback
	jdir   string // the journals' directory
	def    *sandbox.Definition
	recs   chan gateway.Record
	// fenceErr is why the egress network's host fence is missing (not
	// root, no iptables), or nil.
	fenceErr error
}

// newKit starts a gateway and a runner. listen maps provider names to the
// address the gateway listens on for their sandboxes; "local" gets
// 127.0.0.1:0 unless given ("" for none: local sandboxes then cannot
// reach the gateway).
func newKit(t *testing.T, def *sandbox.Definition, listen map[string]string, hs ...harness.Harness) *kit {
	t.Helper()
	return newKitDial(t, def, listen, nil, nil, hs...)
}

// newKitDial is newKit with the forward proxy's dialer and the upstream
// transport (nil for the defaults); a listen key
// "egress:PROVIDER" serves the forward proxy for that provider, and
// "dns:PROVIDER" the DNS of the allow-list (UDP).
func newKitDial(t *testing.T, def *sandbox.Definition, listen map[string]string, dial func(context.Context, string, string) (net.Conn, error), tr http.RoundTripper, hs ...harness.Harness) *kit {
	t.Helper()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "corral.db")
	st, err := sqlitestore.Open(ctx, dbPath, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if listen == nil {
		listen = map[string]string{}
	}
	if _, ok := listen["local"]; !ok {
		listen["local"] = "127.0.0.1:0"
	}
	k := &kit{st: st, dbPath: dbPath, recs: make(chan gateway.Record, 1000), def: def}
	reach, egress := map[string]string{}, map[string]string{}
	var lns []net.Listener
	forward := map[net.Listener]bool{}
	var dns []net.PacketConn
	for p, a := range listen {
		if a == "" {
			continue // that provider's sandboxes do not reach the gateway
		}
		if strings.HasPrefix(p, "dns:") {
			pc, err := net.ListenPacket("udp", a)
			if err != nil {
				t.Fatal(err)
			}
			dns = append(dns, pc)
			continue
		}
		ln, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		if prov, ok := strings.CutPrefix(p, "egress:"); ok {
			egress[prov] = ln.Addr().String()
			forward[ln] = true
			continue
		}
		reach[p] = "http://" + ln.Addr().String()
	}
	k.url = reach["local"]
	var identify func(context.Context, string) (string, bool)
	var dp *docker.Provider
	if sandbox.ProviderAs(def.Provider, &dp) {
		identify = func(ctx context.Context, ip string) (string, bool) {
			if key, ok := dp.EgressSandbox(ctx, ip); ok {
				return k.r.RunOfSandbox(key)
			}
			return "", false
		}
	}
	// The stand-in hosts' names (*.test) resolve to a documentation
	// address, never contacted: the proxy's dialer maps them.
	lookup := func(ctx context.Context, network, host string) ([]netip.Addr, error) {
		if strings.HasSuffix(host, ".test") && network == "ip4" {
			return []netip.Addr{netip.MustParseAddr("192.0.2.10")}, nil
		}
		return net.DefaultResolver.LookupNetIP(ctx, network, host)
	}
	k.g, err = gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st, Reach: reach, EgressReach: egress, Dial: dial, Transport: tr, Identify: identify, Lookup: lookup,
		Definition: func(id string) (*sandbox.Definition, bool) { return k.r.Definition(id) },
		OnRequest: func(r gateway.Record) {
			select {
			case k.recs <- r:
			default:
			}
			gateway.NoteEgress(func(id string, e event.Egress) bool { return k.r.NoteEgress(id, e) })(r)
		}})
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range dns {
		ctx, cancel := context.WithCancel(context.Background())
		go k.g.ServeDNS(ctx, pc)
		t.Cleanup(cancel)
	}
	if a := egress["docker"]; a != "" && dp != nil {
		// As corral serve does: the egress network reaches no host port
		// but the proxy's and DNS.
		_, port, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(port)
		if err := dp.FenceEgressHost(ctx, n); err != nil {
			k.fenceErr = err
		} else {
			t.Cleanup(func() { // the test's port only; the chain stays for corral serve
				if err := docker.UnfenceEgressHost(context.Background(), n); err != nil {
					t.Error(err)
				}
			})
		}
	}
	for _, ln := range lns {
		var h http.Handler = k.g
		if forward[ln] {
			h = k.g.Forward()
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
	}
	if len(hs) == 0 {
		hs = []harness.Harness{command.Harness{}}
	}
	k.jdir = filepath.Join(t.TempDir(), "journals")
	k.r, err = run.New(st, []*sandbox.Definition{def}, hs, run.Options{Broker: k.g, LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond,
		JournalDir: k.jdir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.r.Close(context.Background()) })
	return k
}

// canary returns a fresh secret value.
func canary() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "sk-canary-" + hex.EncodeToString(b)
}

// memscanArgs are memscan's flags for value: its length, fingerprint and
// SHA-256, never the value.
func memscanArgs(value string) []string {
	var h uint64
	for i := 0; i < len(value); i++ {
		h = h*1099511628211 + uint64(value[i])
	}
	s := sha256.Sum256([]byte(value))
	return []string{"-len", strconv.Itoa(len(value)), "-rk", strconv.FormatUint(h, 16), "-sha", hex.EncodeToString(s[:])}
}

// buildMemscan builds the memory scanner, static, into a temporary
// directory.
func buildMemscan(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "memscan")
	cmd := exec.Command("go", "build", "-o", out, "./internal/memscan")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build memscan: %v\n%s", err, b)
	}
	return out
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// journalDir is where the kit's runner keeps journals.
func (k *kit) journalDir(t *testing.T) string {
	t.Helper()
	return k.jdir
}

// tick paces a poll loop (a hang guard bounds the loop, not the pace).
func (k *kit) tick() <-chan time.Time { return time.After(50 * time.Millisecond) }

// ensureReq is the ensure request of a run's sandbox.
func ensureReq(r store.Run) ensure.Request {
	return ensure.Request{Thread: r.ThreadID, Run: r.ID, Tenant: r.Tenant}
}

// complete starts a run, waits for its end and fails the test unless it
// completed; it returns the run and the text of its events. The run's
// sandbox is destroyed when the test ends.
func (k *kit) complete(t *testing.T, req run.StartRequest) (store.Run, string) {
	t.Helper()
	ctx := ctxT(t)
	rec, err := k.r.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.r.Ensure().Destroy(ctxT(t), k.def, ensureReq(rec)) })
	if err := k.r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	text := runText(t, k, rec.ID)
	if got, _, _ := k.st.GetRun(ctx, rec.ID); got.Status != store.RunCompleted {
		t.Fatalf("run %s (%s):\n%s", got.Status, got.Error, text)
	}
	return rec, text
}
