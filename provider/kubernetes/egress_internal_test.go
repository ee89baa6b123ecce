package kubernetes

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// TestEgressRules: with EgressPolicy networkpolicy an allow-list of IP
// entries becomes ipBlock egress rules (a port only on TCP); a host name
// is refused with the hint, and so is any list without the opt-in (the
// network plugin may not enforce a NetworkPolicy) or in Sandbox mode.
func TestEgressRules(t *testing.T) {
	p := testProvider(t, Options{EgressPolicy: EgressNetworkPolicy})
	rules, err := p.egressRules([]string{"203.0.113.7", "198.51.100.2:5432", "[2001:db8::1]:443"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules {
		s := r.To[0].IPBlock.CIDR
		for _, pt := range r.Ports {
			s += " " + string(*pt.Protocol) + "/" + pt.Port.String()
		}
		got = append(got, s)
	}
	if want := "203.0.113.7/32|198.51.100.2/32 TCP/5432|2001:db8::1/128 TCP/443"; strings.Join(got, "|") != want {
		t.Errorf("rules %q, want %q", strings.Join(got, "|"), want)
	}
	var ne sandbox.NativeEgress
	if !sandbox.ProviderAs(p, &ne) {
		t.Fatal("kubernetes is not a sandbox.NativeEgress")
	}
	for _, c := range []struct {
		p    *Provider
		list []string
		want string
	}{
		{p, []string{"203.0.113.7", "api.anthropic.com"}, "not host names"},
		{p, []string{"*.npmjs.org"}, "not host names"},
		{testProvider(t, Options{}), []string{"203.0.113.7"}, "egressPolicy: networkpolicy"},
		{testProvider(t, Options{EgressPolicy: EgressNetworkPolicy, Mode: ModeSandbox}), []string{"203.0.113.7"}, "Pods mode"},
	} {
		err := c.p.NativeEgress(c.list)
		if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want FailedPrecondition with %q", c.list, err, c.want)
		}
	}
	if _, err := New(Options{EgressPolicy: "cilium"}); err == nil || !strings.Contains(err.Error(), "EgressPolicy") {
		t.Errorf("a bad EgressPolicy: %v", err)
	}
}
