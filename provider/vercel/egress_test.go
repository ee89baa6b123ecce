package vercel_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/sandbox"
)

// TestEgressTranslated: an egress allow-list becomes Vercel's firewall
// rules (networkPolicy {allow: names and wildcards, subnets.allow: the IP
// entries}), which the fake accepts as the API does and answers in its
// custom form; an entry with a port is refused, since the format names no
// ports, and the fake refuses a policy the API would (a domain with a
// port, a malformed CIDR).
func TestEgressTranslated(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, vercel.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "eg-1", Egress: []string{"api.anthropic.com", "*.npmjs.org", "API.anthropic.com", "203.0.113.7"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(ctx, h.ID()) })
	got, ok := f.NetworkPolicy(h.ID())
	want := `{"mode":"custom","allowedDomains":["api.anthropic.com","*.npmjs.org"],"allowedCIDRs":["203.0.113.7/32"]}`
	if !ok || string(got) != want {
		t.Fatalf("network policy %s, want %s", got, want)
	}
	var ne sandbox.NativeEgress
	if !sandbox.ProviderAs(p, &ne) {
		t.Fatal("vercel is not a sandbox.NativeEgress")
	}
	for _, list := range [][]string{{"db.example.com:5432"}, {"api.anthropic.com:443"}} {
		if err := ne.NativeEgress(list); sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "without ports") {
			t.Errorf("%v: %v", list, err)
		}
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: "eg-port", Egress: list}); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
			t.Errorf("create with %v: %v", list, err)
		}
	}
	if err := ne.NativeEgress([]string{"github.com", "10.0.0.1"}); err != nil {
		t.Errorf("names and an IP: %v", err)
	}
}
