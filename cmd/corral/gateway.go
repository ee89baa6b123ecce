package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// DefaultGatewayPort is the egress gateway's port. It is fixed so that a
// run's sandbox, which holds the gateway's URL, reaches it again after the
// process serving it restarts (the daemon, or corral attach).
const DefaultGatewayPort = "7778"

// gatewayListen is --gateway-listen's default: loopback, for the local
// provider; CORRAL_GATEWAY_LISTEN overrides it (for corral run too).
var gatewayListen = func() string {
	if v := os.Getenv("CORRAL_GATEWAY_LISTEN"); v != "" {
		return v
	}
	return "127.0.0.1:" + DefaultGatewayPort
}()

// gatewayPublicURL is where the user exposes the gateway for remote
// sandboxes (--gateway-public-url, CORRAL_GATEWAY_PUBLIC_URL); "" for
// nowhere.
var gatewayPublicURL = os.Getenv("CORRAL_GATEWAY_PUBLIC_URL")

// startGateway serves the egress gateway for the definitions' brokered
// secrets and egress allow-lists until ctx ends: on listen (loopback, for
// local sandboxes), where the host has a docker0 bridge on its address
// (for Docker sandboxes), and for Docker definitions with an allow-list
// the forward proxy on the corral-egress network's address, same port. The key is kept in the state directory, so every corral
// process of this user derives the same placeholders. It returns nil when
// no definition has a brokered secret. A port another corral process
// already serves is left to it.
func startGateway(ctx context.Context, st store.Store, defs []*sandbox.Definition, listen string, out io.Writer, runner *atomic.Pointer[run.Runner]) (*gateway.Gateway, error) {
	brokered, egress := false, map[string]string{}
	var egressDocker *docker.Provider
	for _, d := range defs {
		brokered = brokered || len(d.Workspace.SecretsOrEmpty().Brokered()) > 0
		var dp *docker.Provider
		if len(d.Policy.EgressList()) > 0 && sandbox.ProviderAs(d.Provider, &dp) {
			ip, err := dp.EgressGateway(ctx)
			if err != nil {
				return nil, err
			}
			egress["docker"], egressDocker = ip, dp
		}
	}
	if !brokered && len(egress) == 0 {
		return nil, nil
	}
	key, err := daemonKey()
	if err != nil {
		return nil, err
	}
	byID := map[string]*sandbox.Definition{}
	for _, d := range defs {
		byID[d.ID] = d
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--gateway-listen %q: %w", listen, err)
	}
	addrs := map[string]string{"local": listen}
	if ip := dockerBridgeIP(); ip != "" {
		addrs["docker"] = net.JoinHostPort(ip, port)
	}
	reach := map[string]string{}
	for p, a := range addrs {
		reach[p] = "http://" + a
	}
	egressReach := map[string]string{}
	for p, ip := range egress {
		egressReach[p] = net.JoinHostPort(ip, port)
	}
	// Egress attempts become events of the runs this process drives.
	note := gateway.NoteEgress(func(id string, e event.Egress) bool {
		if r := runner.Load(); r != nil {
			return r.NoteEgress(id, e)
		}
		return false
	})
	// A proxy request without credentials is the run's whose container
	// has its source address on corral-egress.
	var identify func(context.Context, string) (string, bool)
	if egressDocker != nil {
		identify = func(ctx context.Context, ip string) (string, bool) {
			key, ok := egressDocker.EgressSandbox(ctx, ip)
			if r := runner.Load(); ok && r != nil {
				return r.RunOfSandbox(key)
			}
			return "", false
		}
	}
	g, err := gateway.New(gateway.Options{Key: key, Runs: st, Reach: reach, EgressReach: egressReach, PublicURL: gatewayPublicURL, Identify: identify,
		Logger: logger(), OnRequest: note,
		Definition: func(id string) (*sandbox.Definition, bool) { d, ok := byID[id]; return d, ok }})
	if err != nil {
		return nil, err
	}
	listeners := map[string]http.Handler{}
	for _, a := range addrs {
		listeners[a] = g
	}
	for _, a := range egressReach {
		listeners[a] = g.Forward()
	}
	// The allow-list's DNS, on the egress network's address (port 53:
	// Docker's resolver forwards there); without it, outside names do
	// not resolve in the sandbox at all.
	for _, ip := range egress {
		pc, err := net.ListenPacket("udp", net.JoinHostPort(ip, "53"))
		if err != nil {
			fmt.Fprintf(out, "corral: egress gateway: no DNS for allow-listed names on %s (%v); names resolve only through the proxy\n", ip, err)
			continue
		}
		go g.ServeDNS(ctx, pc)
	}
	servedEgress := false // this process serves the egress network's proxy port
	for a, h := range listeners {
		ln, err := net.Listen("tcp", a)
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(out, "corral: egress gateway: %s is served by another corral process\n", a)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("egress gateway: %w", err)
		}
		if a == egressReach["docker"] {
			servedEgress = true
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		go func() {
			<-ctx.Done()
			_ = srv.Close()
		}()
	}
	// The egress network reaches no host port but the proxy's and DNS:
	// otherwise a host service listening on all addresses answers it.
	if egressDocker != nil {
		if n, err := strconv.Atoi(port); err == nil {
			if err := egressDocker.FenceEgressHost(ctx, n); err != nil {
				fmt.Fprintf(out, "corral: egress gateway: %v\n", err)
			} else if servedEgress {
				// When this process stops serving the port, the fence
				// stops accepting it (another process serving it fenced
				// it itself and keeps its rule until it stops).
				go func() {
					<-ctx.Done()
					c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = docker.UnfenceEgressHost(c, n)
				}()
			}
		}
	}
	return g, nil
}

// daemonKey is the key kept in the state directory (gateway.key) under
// which the gateway derives placeholders and the daemon its runs' tools
// tokens (each under its own HMAC label). Replicas share the file.
func daemonKey() ([]byte, error) {
	dir, err := stateDir()
	if err != nil {
		return nil, err
	}
	return gateway.LoadOrCreateKey(filepath.Join(dir, "gateway.key"))
}

// dockerBridgeIP is the host's address on Docker's default bridge, which
// containers on it reach the host at; "" without one.
func dockerBridgeIP() string {
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		return ""
	}
	as, err := ifc.Addrs()
	if err != nil {
		return ""
	}
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// printBrokered says at a run's start which secrets are brokered, where
// they may go, which hosts the sandbox may reach, and who serves the
// gateway.
func printBrokered(out io.Writer, def *sandbox.Definition, where string) {
	b := run.BrokeredOf(def)
	allow := def.Policy.EgressList()
	if len(b.Names) == 0 && len(allow) == 0 {
		return
	}
	if len(allow) > 0 {
		fmt.Fprintf(out, "corral: egress allow-list: the sandbox may reach only %s (through the gateway)\n", strings.Join(allow, ", "))
	}
	secrets := def.Workspace.SecretsOrEmpty()
	for _, n := range b.Names {
		fb := ""
		if br, _ := secrets.Broker(n); br.Fallback == sandbox.BrokerFallbackEnv {
			fb = " (fallback env: where the gateway is out of the sandbox's reach, the value is in its environment; the run's start says so)"
		}
		fmt.Fprintf(out, "corral: secret %s is brokered: the sandbox holds a placeholder; the value goes only to %s%s\n", n, strings.Join(b.Hosts[n], ", "), fb)
	}
	fmt.Fprintf(out, "corral: egress gateway: %s\n", where)
}
