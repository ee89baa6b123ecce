package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/d10ffeed/corral/sandbox"
)

// A port of a sandbox is reached through the API server's port-forward
// subresource: ConnectPort opens a listener on 127.0.0.1 and every TCP
// connection accepted there gets its own port-forward session to the Pod
// (so one failed connection, say before the server in the Pod listens,
// does not end the forward, as it would with client-go's PortForwarder).
// The listener lives until the sandbox is destroyed or the provider is
// closed.

// forward is one listening port forward.
type forward struct {
	pod  string
	port int
	ln   net.Listener
	url  string
}

// forwards are a provider's open port forwards by Pod and port.
type forwards struct {
	mu sync.Mutex
	m  map[string]*forward
}

func fwdKey(pod string, port int) string { return pod + ":" + strconv.Itoa(port) }

// ConnectPort returns an http:// endpoint on 127.0.0.1 that reaches the
// sandbox's port through the API server, or with Options.Ports
// PortsService http://<cluster IP>:<port> of a Service of the sandbox's
// own (see service.go). Asking again for the same port returns the same
// endpoint.
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	const op = "kubernetes.connectPort"
	if port < 1 || port > 65535 {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.InvalidArgument, op, h.id, "port %d out of range", port)
	}
	p := h.p
	if p.opts.Ports == PortsService {
		return p.servicePort(ctx, op, h, port)
	}
	p.fwd.mu.Lock()
	defer p.fwd.mu.Unlock()
	if f := p.fwd.m[fwdKey(h.pod, port)]; f != nil {
		return sandbox.Endpoint{URL: f.url}, nil
	}
	d, err := p.portDialer(h.pod)
	if err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.Internal, op, h.id, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.Unavailable, op, h.id, err)
	}
	f := &forward{pod: h.pod, port: port, ln: ln, url: "http://" + ln.Addr().String()}
	if p.fwd.m == nil {
		p.fwd.m = map[string]*forward{}
	}
	p.fwd.m[fwdKey(h.pod, port)] = f
	go p.serveForward(f, d)
	p.log.Debug("kubernetes: port forward", "id", h.id, "port", port, "url", f.url)
	return sandbox.Endpoint{URL: f.url}, nil
}

// portDialer dials the Pod's port-forward subresource: SPDY tunnelled
// over WebSocket, falling back to SPDY when the upgrade fails (as kubectl
// does).
func (p *Provider) portDialer(pod string) (httpstream.Dialer, error) {
	u := p.core.rc.Post().Namespace(p.ns).Resource("pods").Name(pod).SubResource("portforward").URL()
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, p.cfg)
	if err != nil {
		return nil, err
	}
	rt, up, err := spdy.RoundTripperFor(p.cfg)
	if err != nil {
		return nil, err
	}
	sp := spdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, u)
	return portforward.NewFallbackDialer(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// serveForward accepts connections until the listener is closed.
func (p *Provider) serveForward(f *forward, d httpstream.Dialer) {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			if err := forwardConn(c, d, f.port); err != nil {
				p.log.Debug("kubernetes: a forwarded connection failed", "id", f.pod, "port", f.port, "err", err)
			}
		}()
	}
}

// forwardConn carries one local connection to the Pod's port over a
// port-forward session of its own.
func forwardConn(c net.Conn, d httpstream.Dialer, port int) error {
	defer c.Close()
	conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return err
	}
	defer conn.Close()
	hdr := http.Header{}
	hdr.Set(corev1.StreamType, corev1.StreamTypeError)
	hdr.Set(corev1.PortHeader, strconv.Itoa(port))
	hdr.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(hdr)
	if err != nil {
		return err
	}
	_ = errStream.Close() // nothing is written to it
	errc := make(chan []byte, 1)
	go func() {
		msg, _ := io.ReadAll(errStream)
		errc <- msg
	}()
	hdr.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(hdr)
	if err != nil {
		return err
	}
	remoteDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, data)
		close(remoteDone)
	}()
	go func() {
		_, _ = io.Copy(data, c)
		_ = data.Close() // no more from the local side
	}()
	<-remoteDone
	_ = data.Reset()
	if msg := <-errc; len(msg) > 0 {
		return fmt.Errorf("port-forward: %s", msg)
	}
	return nil
}

// stopForwards closes the forwards of a Pod ("" for every Pod).
func (p *Provider) stopForwards(pod string) {
	p.fwd.mu.Lock()
	defer p.fwd.mu.Unlock()
	for k, f := range p.fwd.m {
		if pod == "" || f.pod == pod {
			_ = f.ln.Close()
			delete(p.fwd.m, k)
		}
	}
}
