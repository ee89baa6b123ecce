package gateway_test

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/sandbox"
)

// TestDNSAnswersListedNamesOnly asks the gateway's DNS, over UDP on
// loopback, for listed names (a wildcard entry with a port: the port is
// ignored) and unlisted ones, from an address that names the run and from
// one that names none; only listed names of the run resolve.
func TestDNSAnswersListedNamesOnly(t *testing.T) {
	st, rec := liveRun(t, "run-dns")
	def := &sandbox.Definition{ID: "d", Policy: &sandbox.Policy{Egress: []string{"*.example.test:443", "exact.test"}}}
	for _, tt := range []struct {
		name, host string
		known      bool // the source address names the run
		want       bool
	}{
		{"wildcard", "api.example.test", true, true},
		{"exact", "exact.test", true, true},
		{"unlisted", "other.test", true, false},
		{"the wildcard's parent", "example.test", true, false},
		{"no run", "exact.test", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g, err := gateway.New(gateway.Options{Key: gateway.NewKey(), Runs: st,
				Definition: func(string) (*sandbox.Definition, bool) { return def, true },
				Identify:   func(context.Context, string) (string, bool) { return rec.ID, tt.known },
				Lookup: func(context.Context, string, string) ([]netip.Addr, error) {
					return []netip.Addr{netip.MustParseAddr("192.0.2.7")}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			pc, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(ctxT(t))
			t.Cleanup(cancel)
			go g.ServeDNS(ctx, pc)
			r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "udp", pc.LocalAddr().String())
			}}
			addrs, err := r.LookupNetIP(ctx, "ip4", tt.host)
			got := err == nil && len(addrs) == 1 && addrs[0].String() == "192.0.2.7"
			if got != tt.want {
				t.Fatalf("%s: %v %v, want answered=%v", tt.host, addrs, err, tt.want)
			}
		})
	}
}
