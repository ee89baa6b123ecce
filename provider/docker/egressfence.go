package docker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// EgressFenceChain is the iptables chain that fences EgressNetwork's
// containers off the host: the only host ports they reach are the egress
// gateway's (TCP) and its DNS (53). Without it, any host service that
// listens on all addresses (a database, a dev server) answers them on the
// network's gateway address, past the allow-list.
const EgressFenceChain = "CORRAL-EGRESS"

// bridgeName is the host interface of a Docker bridge network: the name
// its options give, else Docker's "br-" and the first 12 characters of the
// network's id.
func bridgeName(id string, options map[string]string) string {
	if n := options["com.docker.network.bridge.name"]; n != "" {
		return n
	}
	if len(id) > 12 {
		id = id[:12]
	}
	return "br-" + id
}

// FenceEgressHost makes the host drop what EgressNetwork's containers send
// to it, but for the given TCP ports (the egress gateway's) and DNS: an
// iptables chain (EgressFenceChain) jumped to from INPUT for the network's
// bridge. Rules are added only when missing, so corral processes with
// different gateway ports share the chain, each port accepted before the
// final DROP. It needs root and iptables; without them it returns a
// FailedPrecondition error that says what stays reachable.
func (p *Provider) FenceEgressHost(ctx context.Context, tcpPorts ...int) error {
	const op = "docker.egress_fence"
	res, err := p.cli.NetworkInspect(ctx, EgressNetwork, client.NetworkInspectOptions{})
	if err != nil {
		return sandbox.Wrap(sandbox.Unavailable, op, EgressNetwork, err)
	}
	if os.Geteuid() != 0 {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, EgressNetwork, "not root: host services listening on all addresses stay reachable from allow-listed sandboxes at the network's gateway address")
	}
	ipt, err := exec.LookPath("iptables")
	if err != nil {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, EgressNetwork, "no iptables: host services listening on all addresses stay reachable from allow-listed sandboxes at the network's gateway address")
	}
	bridge := bridgeName(res.Network.ID, res.Network.Options)
	run := func(args ...string) error {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, ipt, append([]string{"-w"}, args...)...)
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("iptables %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	// present reports whether a rule is there (iptables -C).
	present := func(chain string, rule ...string) bool {
		return exec.CommandContext(ctx, ipt, append([]string{"-w", "-C", chain}, rule...)...).Run() == nil
	}
	chainExists := func() bool { return exec.CommandContext(ctx, ipt, "-w", "-n", "-L", EgressFenceChain).Run() == nil }
	if !chainExists() {
		// A corral process racing this one may make it first.
		if err := run("-N", EgressFenceChain); err != nil && !chainExists() {
			return sandbox.Wrap(sandbox.Internal, op, EgressNetwork, err)
		}
	}
	accept := [][]string{{"-p", "udp", "--dport", "53", "-j", "ACCEPT"}, {"-p", "tcp", "--dport", "53", "-j", "ACCEPT"}}
	for _, port := range tcpPorts {
		accept = append(accept, []string{"-p", "tcp", "--dport", strconv.Itoa(port), "-j", "ACCEPT"})
	}
	for _, rule := range accept {
		if !present(EgressFenceChain, rule...) {
			if err := run(append([]string{"-I", EgressFenceChain, "1"}, rule...)...); err != nil {
				return sandbox.Wrap(sandbox.Internal, op, EgressNetwork, err)
			}
		}
	}
	if !present(EgressFenceChain, "-j", "DROP") {
		if err := run("-A", EgressFenceChain, "-j", "DROP"); err != nil {
			return sandbox.Wrap(sandbox.Internal, op, EgressNetwork, err)
		}
	}
	if !present("INPUT", "-i", bridge, "-j", EgressFenceChain) {
		if err := run("-I", "INPUT", "1", "-i", bridge, "-j", EgressFenceChain); err != nil {
			return sandbox.Wrap(sandbox.Internal, op, EgressNetwork, err)
		}
	}
	return nil
}

// UnfenceEgressHost takes the given TCP ports' accept rules out of
// EgressFenceChain (the chain, its DNS rules and its final DROP stay for
// other corral processes). A corral process that fenced its gateway port
// calls it when it stops serving that port, so no later service on the
// port is reachable from the egress network. Rules already gone are no
// error; without root or iptables it does nothing.
func UnfenceEgressHost(ctx context.Context, tcpPorts ...int) error {
	const op = "docker.egress_unfence"
	ipt, err := exec.LookPath("iptables")
	if err != nil || os.Geteuid() != 0 {
		return nil
	}
	for _, port := range tcpPorts {
		rule := []string{EgressFenceChain, "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "ACCEPT"}
		// A rule added twice (by racing processes) is deleted twice.
		for exec.CommandContext(ctx, ipt, append([]string{"-w", "-C"}, rule...)...).Run() == nil {
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, ipt, append([]string{"-w", "-D"}, rule...)...)
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				return sandbox.Wrap(sandbox.Internal, op, EgressNetwork, fmt.Errorf("iptables -D %s: %v: %s", strings.Join(rule, " "), err, strings.TrimSpace(stderr.String())))
			}
		}
	}
	return nil
}
