package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// agentToolsReach says where sandboxes reach the daemon's tools, given
// the daemon's own listener: local sandboxes at its address (loopback when
// it listens on every address), Docker sandboxes at the host's docker0
// address on the same port. Unless the daemon already listens on every
// address, it binds that docker0 address for the tools-only handler
// (server.ToolsHandler) and returns the listener; an address it cannot
// bind is reported, and Docker sandboxes get no tools.
func agentToolsReach(ln net.Addr, out io.Writer) (reach map[string]string, toolsOnly net.Listener) {
	a, ok := ln.(*net.TCPAddr)
	if !ok {
		return nil, nil
	}
	port := strconv.Itoa(a.Port)
	local := a.String()
	if a.IP.IsUnspecified() {
		local = net.JoinHostPort("127.0.0.1", port)
	}
	reach = map[string]string{"local": "http://" + local}
	ip := dockerBridgeIP()
	if ip == "" {
		return reach, nil
	}
	d := net.JoinHostPort(ip, port)
	if !a.IP.IsUnspecified() {
		l, err := net.Listen("tcp", d)
		if err != nil {
			fmt.Fprintf(out, "corral: agent tools: cannot serve Docker sandboxes on %s (%v); their agents get no checkpoint tools\n", d, err)
			return reach, nil
		}
		toolsOnly = l
	}
	reach["docker"] = "http://" + d
	return reach, toolsOnly
}

// serveUntil serves h on ln until ctx ends.
func serveUntil(ctx context.Context, ln net.Listener, h http.Handler) {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
}
