package main

import (
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/qemu/guestproto"
)

// host is the test's side of a server's port.
type host struct {
	t  *testing.T
	w  io.Writer
	rd *guestproto.Reader
	// reject is a session whose output must not arrive.
	reject uint64
}

func newHost(t *testing.T) *host {
	t.Helper()
	toGuestR, toGuestW := io.Pipe()
	toHostR, toHostW := io.Pipe()
	r := newReaper()
	s := newServer(slog.New(slog.DiscardHandler), []string{"PATH=/usr/bin:/bin", "BASE=1"}, "boot", r)
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-chld:
				r.reap()
			case <-time.After(50 * time.Millisecond): // a SIGCHLD can coalesce
				r.reap()
			case <-done:
				return
			}
		}
	}()
	go s.writeLoop(toHostW)
	go func() { _ = s.readLoop(toGuestR) }()
	t.Cleanup(func() {
		signal.Stop(chld)
		close(done)
		toGuestW.Close()
		toHostR.Close()
	})
	return &host{t: t, w: toGuestW, rd: guestproto.NewReader(toHostR)}
}

func (h *host) send(m *guestproto.Msg) {
	h.t.Helper()
	f, err := guestproto.Encode(m)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.w.Write(f); err != nil {
		h.t.Fatal(err)
	}
}

// run starts argv in session and collects its output until its exit.
func (h *host) run(session, id uint64, argv []string, stdin string) (stdout, stderr string, code int) {
	h.t.Helper()
	h.send(&guestproto.Msg{T: guestproto.Start, Session: session, ID: id, Argv: argv, Env: []string{"EXTRA=2"}, Stdin: stdin != ""})
	if stdin != "" {
		h.send(&guestproto.Msg{T: guestproto.StdinData, Session: session, ID: id, Data: []byte(stdin)})
		h.send(&guestproto.Msg{T: guestproto.CloseStdin, Session: session, ID: id})
	}
	for {
		m, err := h.rd.Read()
		if err != nil {
			h.t.Fatal(err)
		}
		if h.reject != 0 && m.Session == h.reject && (m.T == guestproto.Output || m.T == guestproto.Exit) {
			h.t.Fatalf("output of the ended session %d delivered: %+v", h.reject, m)
		}
		if m.ID != id || m.Session != session {
			continue
		}
		switch m.T {
		case guestproto.Output:
			if m.FD == 1 {
				stdout += string(m.Data)
			} else {
				stderr += string(m.Data)
			}
		case guestproto.Error:
			h.t.Fatalf("start: %s", m.Err)
		case guestproto.Exit:
			return stdout, stderr, m.Code
		}
	}
}

func (h *host) hello(session uint64) {
	h.t.Helper()
	h.send(&guestproto.Msg{T: guestproto.Hello, Session: session})
	for {
		m, err := h.rd.Read()
		if err != nil {
			h.t.Fatal(err)
		}
		if m.T == guestproto.HelloOK && m.Session == session {
			return
		}
	}
}

func TestServerExec(t *testing.T) {
	h := newHost(t)
	h.hello(1)
	tests := []struct {
		name      string
		argv      []string
		stdin     string
		out, errs string
		code      int
	}{
		{"exit code and env overlay", []string{"sh", "-c", `echo "$BASE$EXTRA"; echo e >&2; exit 7`}, "", "12\n", "e\n", 7},
		{"stdin to EOF", []string{"sh", "-c", "cat; echo end"}, "in\n", "in\nend\n", "", 0},
		{"own session", []string{"sh", "-c", `[ "$(ps -o sid= -p $$ | tr -d ' ')" = $$ ] && echo leader`}, "", "leader\n", "", 0},
		{"signal", []string{"sh", "-c", "kill -TERM $$"}, "", "", "", 128 + int(syscall.SIGTERM)},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.t = t
			out, errs, code := h.run(1, uint64(i+1), tt.argv, tt.stdin)
			if out != tt.out || errs != tt.errs || code != tt.code {
				t.Fatalf("got %q %q %d, want %q %q %d", out, errs, code, tt.out, tt.errs, tt.code)
			}
		})
	}
}

// TestServerSessionDropsOldOutput: after a new Hello, a command of the
// old session runs on but its output and exit are not delivered.
func TestServerSessionDropsOldOutput(t *testing.T) {
	h := newHost(t)
	h.hello(1)
	h.send(&guestproto.Msg{T: guestproto.Start, Session: 1, ID: 1, Argv: []string{"sh", "-c", "sleep 0.3; echo old"}})
	h.hello(2)
	h.reject = 1
	out, _, code := h.run(2, 1, []string{"sh", "-c", "sleep 0.6; echo new"}, "")
	if out != "new\n" || code != 0 {
		t.Fatalf("got %q %d", out, code)
	}
}
