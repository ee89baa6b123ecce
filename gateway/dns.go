package gateway

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/d10ffeed/corral/sandbox"
)

// DNS under an egress allow-list: the sandbox's resolver (Docker's
// embedded one, with the container's DNS server set to the egress
// network's gateway address) forwards outside names to ServeDNS, which
// answers the names the run's allow-list lists (wildcards as there, ports
// ignored) with their addresses and refuses every other name (REFUSED),
// each refusal a Record (kind egress, method DNS) and so an egress.attempt
// event. The run is named by the query's source address
// (Options.Identify); a query of no identifiable run is refused.

// ServeDNS answers DNS queries on pc until ctx ends or pc fails.
func (g *Gateway) ServeDNS(ctx context.Context, pc net.PacketConn) {
	stop := context.AfterFunc(ctx, func() { pc.Close() })
	defer stop()
	buf := make([]byte, 1500)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if out := g.answerDNS(ctx, buf[:n], addr); out != nil {
			_, _ = pc.WriteTo(out, addr)
		}
	}
}

// answerDNS returns the reply to one query from addr, or nil to drop it.
func (g *Gateway) answerDNS(ctx context.Context, query []byte, addr net.Addr) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil
	}
	q, err := p.Question()
	if err != nil {
		return nil
	}
	name := strings.ToLower(strings.TrimSuffix(q.Name.String(), "."))
	ip := addr.String()
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	reply := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	rec := Record{Kind: "egress", Method: "DNS", Host: name}
	began := time.Now()
	var answers []dnsmessage.Resource
	if why, runID := g.dnsAllowed(ctx, ip, name); why != "" {
		rec.RunID, rec.Refused = runID, why
		reply.RCode = dnsmessage.RCodeRefused
	} else {
		rec.RunID = runID
		answers = g.lookup(ctx, q, name)
	}
	rec.Duration = time.Since(began)
	g.o.Logger.Info("gateway: dns", "run", rec.RunID, "host", name, "refused", rec.Refused)
	if g.o.OnRequest != nil {
		g.o.OnRequest(rec)
	}
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), reply)
	b.EnableCompression()
	if b.StartQuestions() != nil || b.Question(q) != nil || b.StartAnswers() != nil {
		return nil
	}
	for _, a := range answers {
		var err error
		switch body := a.Body.(type) {
		case *dnsmessage.AResource:
			err = b.AResource(a.Header, *body)
		case *dnsmessage.AAAAResource:
			err = b.AAAAResource(a.Header, *body)
		}
		if err != nil {
			return nil
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

// dnsAllowed says why a query for name from ip is refused ("" when it is
// not), and the run it is of.
func (g *Gateway) dnsAllowed(ctx context.Context, ip, name string) (why, runID string) {
	if g.o.Identify == nil {
		return "no run is known by its address", ""
	}
	runID, ok := g.o.Identify(ctx, ip)
	if !ok {
		return "no run is known by its address", ""
	}
	run, found, err := g.o.Runs.GetRun(ctx, runID)
	if err != nil || !found || run.Status.Terminal() {
		return "the run has ended", runID
	}
	def, ok := g.o.Definition(run.DefinitionID)
	if !ok {
		return "the run's definition is not served here", runID
	}
	var names []string
	for _, e := range def.Policy.EgressList() {
		if i := strings.LastIndexByte(e, ':'); i >= 0 && !strings.HasSuffix(e, "]") {
			e = e[:i]
		}
		names = append(names, e)
	}
	if !sandbox.EgressAllows(names, name) {
		return "not on the egress allow-list", runID
	}
	return "", runID
}

// lookup resolves a listed name for the query's type (A or AAAA; other
// types get no answer).
func (g *Gateway) lookup(ctx context.Context, q dnsmessage.Question, name string) []dnsmessage.Resource {
	network := map[dnsmessage.Type]string{dnsmessage.TypeA: "ip4", dnsmessage.TypeAAAA: "ip6"}[q.Type]
	if network == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := g.o.Lookup(ctx, network, name)
	if err != nil {
		return nil
	}
	var out []dnsmessage.Resource
	for _, a := range addrs {
		hdr := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 60}
		switch a = a.Unmap(); {
		case a.Is4() && q.Type == dnsmessage.TypeA:
			out = append(out, dnsmessage.Resource{Header: hdr, Body: &dnsmessage.AResource{A: a.As4()}})
		case a.Is6() && q.Type == dnsmessage.TypeAAAA:
			out = append(out, dnsmessage.Resource{Header: hdr, Body: &dnsmessage.AAAAResource{AAAA: a.As16()}})
		}
	}
	return out
}

// defaultLookup resolves with the host's resolver.
func defaultLookup(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}
