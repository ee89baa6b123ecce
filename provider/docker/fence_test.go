package docker_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/d10ffeed/corral/provider/docker"
)

// TestUnfenceEgressHost: a process's gateway port is accepted by the fence
// while it serves and not after UnfenceEgressHost; another process's port,
// DNS and the final DROP stay.
func TestUnfenceEgressHost(t *testing.T) {
	p := newProvider(t, docker.Options{})
	if _, err := exec.LookPath("iptables"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the egress fence needs root and iptables")
		}
		t.Skip("the egress fence needs root and iptables")
	}
	ctx := context.Background()
	if _, err := p.EgressGateway(ctx); err != nil {
		t.Fatal(err)
	}
	const mine, other = "47613", "47614"
	if err := p.FenceEgressHost(ctx, 47613, 47614); err != nil {
		t.Fatal(err)
	}
	has := func(rule ...string) bool {
		return exec.Command("iptables", append([]string{"-w", "-C", docker.EgressFenceChain}, rule...)...).Run() == nil
	}
	t.Cleanup(func() { _ = docker.UnfenceEgressHost(context.Background(), 47614) })
	if !has("-p", "tcp", "--dport", mine, "-j", "ACCEPT") || !has("-p", "tcp", "--dport", other, "-j", "ACCEPT") {
		t.Fatal("FenceEgressHost did not accept both ports")
	}
	if err := docker.UnfenceEgressHost(ctx, 47613); err != nil {
		t.Fatal(err)
	}
	if err := docker.UnfenceEgressHost(ctx, 47613); err != nil {
		t.Fatalf("a second unfence: %v", err)
	}
	if has("-p", "tcp", "--dport", mine, "-j", "ACCEPT") {
		t.Error("the port is still accepted after UnfenceEgressHost")
	}
	for _, rule := range [][]string{
		{"-p", "tcp", "--dport", other, "-j", "ACCEPT"},
		{"-p", "udp", "--dport", "53", "-j", "ACCEPT"},
		{"-j", "DROP"},
	} {
		if !has(rule...) {
			t.Errorf("the rule %v went with the other port's", rule)
		}
	}
}
