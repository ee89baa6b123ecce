package daytona_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/provider/daytona/daytonafake"
	"github.com/d10ffeed/corral/sandbox"
)

// TestEgressTranslated: an egress allow-list becomes Daytona's own lists
// (IPv4 entries networkAllowList as /32 CIDRs, names and wildcards
// domainAllowList), which the fake accepts as Daytona documents them; an
// entry with a port, an IPv6 address and a sixth CIDR are refused, since
// the lists cannot say them.
func TestEgressTranslated(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, daytona.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "eg-1", Egress: []string{"api.anthropic.com", "*.npmjs.org", "203.0.113.7", "api.anthropic.com", "198.51.100.2"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(ctx) })
	got, ok := f.SandboxNetwork(h.ID())
	want := daytonafake.Network{NetworkAllowList: "203.0.113.7/32,198.51.100.2/32", DomainAllowList: "api.anthropic.com,*.npmjs.org"}
	if !ok || got != want {
		t.Fatalf("network %+v, want %+v", got, want)
	}
	var ne sandbox.NativeEgress
	if !sandbox.ProviderAs(p, &ne) {
		t.Fatal("daytona is not a sandbox.NativeEgress")
	}
	for _, c := range []struct {
		list []string
		want string
	}{
		{[]string{"db.example.com:5432"}, "without ports"},
		{[]string{"api.anthropic.com:443"}, "without ports"},
		{[]string{"2001:db8::1"}, "IPv4"},
		{[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}, "at most 5"},
	} {
		if err := ne.NativeEgress(c.list); sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want FailedPrecondition with %q", c.list, err, c.want)
		}
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: "eg-refused", Egress: c.list}); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
			t.Errorf("create with %v: %v", c.list, err)
		}
	}
}
