package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The relay is the reverse proxy's fast path for a plain-HTTP/1.1
// upstream (a model endpoint on the host, a local inference server): once
// the request is checked and its header swapped, the gateway sends it over
// a connection of its own, relays the response's status line and header,
// and moves the body's bytes, framing included, from the upstream's socket
// to the agent's with (*net.TCPConn).ReadFrom — splice(2) on Linux, so
// the bytes never cross the gateway's memory. A proxy copying through user
// space costs about as much again as the direct read (profile: all of it
// in read and write syscalls); the splice is what keeps a 50 MB stream
// within 10% of a direct one (BenchmarkStream50MB).
//
// Framing stays the upstream's and is exact: the request asks the
// upstream to close after its answer (Connection: close), so a chunked or
// close-delimited body ends at the upstream's EOF and a Content-Length
// one after its length; the agent's connection is closed after the
// response (Connection: close), so no keep-alive state is carried over a
// hijacked connection. The body is bounded by Options.MaxResponseBytes
// (its bytes on the wire), and the Record is metadata as everywhere.
// Requests the relay does not take (HTTPS upstreams, a custom Transport,
// HTTP/2 agents, upgrades, Expect) go through httputil.ReverseProxy.

// relaySendBuffer is the agent's socket's send buffer on the relay. Left
// to autotuning it grows to megabytes, the splice runs far ahead of the
// reader and the agent's reads copy from cold memory: the 50 MB stream
// took 1.6–2× the direct read. 64 KiB (the kernel doubles it) keeps the
// pipeline tight (≈1.0–1.2×); below it, the loopback's 64 KiB segments
// stall on the buffer (32 KiB took seconds an operation).
const relaySendBuffer = 64 << 10

// hopHeaders are the hop-by-hop fields (RFC 9110 §7.6.1) a proxy drops;
// Trailer stays, since a relayed chunked body carries its trailers.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Transfer-Encoding", "Upgrade"}

// relayable says whether the relay takes out (the upstream request) for
// the agent's writer w.
func (g *Gateway) relayable(w http.ResponseWriter, r, out *http.Request) bool {
	if !g.relay || out.URL.Scheme != "http" || r.ProtoMajor != 1 || r.Header.Get("Upgrade") != "" || r.Header.Get("Expect") != "" {
		return false
	}
	for {
		if _, ok := w.(http.Hijacker); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}

// serveRelay forwards out (checked, its header swapped) and relays the
// answer to cw's connection.
func (g *Gateway) serveRelay(cw *countingWriter, out *http.Request) {
	ctx := out.Context()
	addr := out.URL.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "80")
	}
	d := net.Dialer{Timeout: 30 * time.Second}
	up, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		cw.WriteHeader(http.StatusBadGateway)
		return
	}
	defer up.Close()
	stop := context.AfterFunc(ctx, func() { up.Close() })
	defer stop()
	removeHop(out.Header)
	out.Header.Set("Connection", "close")
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header.Set("User-Agent", "") // no Go default: the agent's, or none
	}
	out.Close = true
	_ = up.SetDeadline(time.Now().Add(10 * time.Minute)) // the request, then the response's header
	if err := out.Write(up); err != nil {
		cw.WriteHeader(http.StatusBadGateway)
		return
	}
	br := bufio.NewReaderSize(up, 16<<10)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(br, out)
		if err != nil {
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, net.ErrClosed) && ctx.Err() != nil {
				status = http.StatusGatewayTimeout
			}
			cw.WriteHeader(status)
			return
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// 1xx informational answers (103 Early Hints) are not relayed.
	}
	_ = up.SetDeadline(time.Time{})
	hdr := resp.Header.Clone()
	removeHop(hdr)
	hdr.Del("Content-Length")
	hdr.Set("Connection", "close")
	body := int64(-1) // until the upstream's EOF
	switch {
	case out.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified || resp.StatusCode < 200:
		body = 0
		if resp.ContentLength >= 0 {
			hdr.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		hdr.Set("Transfer-Encoding", "chunked")
	case resp.ContentLength >= 0:
		hdr.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		body = resp.ContentLength
	}
	conn, bufrw, err := http.NewResponseController(cw).Hijack()
	if err != nil {
		cw.WriteHeader(http.StatusBadGateway)
		return
	}
	defer conn.Close()
	cw.status = resp.StatusCode
	_ = conn.SetDeadline(time.Time{})
	bw := bufrw.Writer
	_, _ = bw.WriteString("HTTP/1.1 " + strconv.Itoa(resp.StatusCode) + " " + strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(resp.StatusCode))) + "\r\n")
	_ = hdr.Write(bw)
	_, _ = bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil || body == 0 {
		return
	}
	left := g.o.MaxResponseBytes
	if left < 0 || (body >= 0 && body < left) {
		left = body
	}
	if left < 0 {
		left = 1<<63 - 1
	}
	// What the header's read left buffered, then the rest socket to socket.
	n, err := io.Copy(conn, io.LimitReader(br, min(int64(br.Buffered()), left)))
	cw.n += n
	left -= n
	if err != nil || left == 0 {
		return
	}
	if t, ok := conn.(*net.TCPConn); ok {
		_ = t.SetWriteBuffer(relaySendBuffer)
	}
	n, _ = io.Copy(conn, &io.LimitedReader{R: up, N: left})
	cw.n += n
}

// removeHop drops the hop-by-hop fields of h, and those its Connection
// field names.
func removeHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}
