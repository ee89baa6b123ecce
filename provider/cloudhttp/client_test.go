package cloudhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

const secret = "sk-test-0123456789abcdef"

func client(t *testing.T, url string, w *testutil.Sleeps, log *bytes.Buffer) *cloudhttp.Client {
	t.Helper()
	opts := cloudhttp.Options{
		Provider: "fake", BaseURL: url,
		Header: http.Header{"Authorization": {"Bearer " + secret}},
		Sleep:  w.Sleep, Jitter: func() float64 { return 0.5 },
	}
	if log != nil {
		opts.Log = slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := cloudhttp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// script answers the i-th request with steps[i] (the last one repeats).
func script(t *testing.T, steps ...func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no auth", http.StatusUnauthorized)
			return
		}
		i := int(n.Add(1)) - 1
		if i >= len(steps) {
			i = len(steps) - 1
		}
		steps[i](w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func status(code int, body string, h ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(h); i += 2 {
			w.Header().Set(h[i], h[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

func TestRetriesIdempotentCalls(t *testing.T) {
	for _, tc := range []struct {
		name      string
		method    string
		idem      bool
		steps     []func(http.ResponseWriter, *http.Request)
		wantCalls int32
		wantCode  sandbox.Code
		wantWaits []time.Duration
	}{
		{"429 then ok honours Retry-After", "GET", false, []func(http.ResponseWriter, *http.Request){status(429, `{"message":"slow down"}`, "Retry-After", "3"), status(200, `{"ok":true}`)}, 2, sandbox.OK, []time.Duration{3 * time.Second}},
		{"503 twice then ok", "GET", false, []func(http.ResponseWriter, *http.Request){status(503, ""), status(503, ""), status(200, `{}`)}, 3, sandbox.OK, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}},
		{"503 for ever gives up", "DELETE", false, []func(http.ResponseWriter, *http.Request){status(503, `{"error":"down"}`)}, 4, sandbox.Unavailable, nil},
		{"POST not retried on 503", "POST", false, []func(http.ResponseWriter, *http.Request){status(503, ""), status(200, `{}`)}, 1, sandbox.Unavailable, nil},
		{"POST marked idempotent is", "POST", true, []func(http.ResponseWriter, *http.Request){status(502, ""), status(200, `{}`)}, 2, sandbox.OK, nil},
		{"POST retried on 429 (refused)", "POST", false, []func(http.ResponseWriter, *http.Request){status(429, "", "Retry-After", "1"), status(200, `{}`)}, 2, sandbox.OK, nil},
		{"404 is final", "GET", false, []func(http.ResponseWriter, *http.Request){status(404, `{"message":"no such sandbox"}`)}, 1, sandbox.NotFound, nil},
		{"400 is final", "GET", false, []func(http.ResponseWriter, *http.Request){status(400, `bad`)}, 1, sandbox.InvalidArgument, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := script(t, tc.steps...)
			w := &testutil.Sleeps{}
			_, err := client(t, srv.URL, w, nil).Do(context.Background(), cloudhttp.Request{Op: "fake.op", Method: tc.method, Path: "/v1/x", Idempotent: tc.idem}, nil)
			if got := sandbox.CodeOf(err); got != tc.wantCode {
				t.Errorf("code %v, want %v (err %v)", got, tc.wantCode, err)
			}
			if n.Load() != tc.wantCalls {
				t.Errorf("%d calls, want %d", n.Load(), tc.wantCalls)
			}
			if tc.wantWaits != nil && !equalDurations(w.All(), tc.wantWaits) {
				t.Errorf("waits %v, want %v", w.All(), tc.wantWaits)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestErrorsCarryMessageAndRequestIDNeverTheSecret(t *testing.T) {
	srv, _ := script(t, status(403, `{"error":{"message":"token `+secret+` is not allowed"}}`, "X-Request-Id", "req-42"))
	var log bytes.Buffer
	_, err := client(t, srv.URL, &testutil.Sleeps{}, &log).Do(context.Background(), cloudhttp.Request{Op: "fake.get", ID: "sb-1", Method: "GET", Path: "/v1/sandboxes/sb-1?token=" + secret}, nil)
	if sandbox.CodeOf(err) != sandbox.PermissionDenied || cloudhttp.StatusOf(err) != 403 {
		t.Fatalf("err %v", err)
	}
	msg := err.Error()
	for _, want := range []string{"fake.get", "sb-1", "403", "is not allowed", "req-42"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, secret) || strings.Contains(log.String(), secret) {
		t.Errorf("the secret leaked: error %q, log %q", msg, log.String())
	}
	if !strings.Contains(log.String(), "status=403") {
		t.Errorf("no log line for the attempt: %q", log.String())
	}
}

func TestCreateReconcilesAnUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first       func(http.ResponseWriter, *http.Request)
		found       bool
		wantCreates int32
		wantLookups int
	}{
		// The backend made it and then answered 504: found, no second create.
		{"accepted then 504", status(504, "gateway timeout"), true, 1, 1},
		// The backend did not make it: one more create.
		{"503 not made", status(503, ""), false, 2, 1},
		// A connection dropped after the request went out.
		{"reset after sending", func(w http.ResponseWriter, r *http.Request) {
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close()
		}, true, 1, 1},
		// A refusal that says so is not an unknown outcome.
		{"409 is final", status(409, `{"message":"exists"}`), false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := script(t, tc.first, status(201, `{"id":"sb-2"}`))
			lookups := 0
			var out struct{ ID string }
			err := client(t, srv.URL, &testutil.Sleeps{}, nil).Create(context.Background(), cloudhttp.Request{Op: "fake.create", Method: "POST", Path: "/v1/sandboxes", JSON: map[string]string{"name": "corral-abc"}}, &out,
				func(ctx context.Context) (bool, error) { lookups++; return tc.found, nil })
			if n.Load() != tc.wantCreates || lookups != tc.wantLookups {
				t.Errorf("%d creates and %d lookups, want %d and %d (err %v)", n.Load(), lookups, tc.wantCreates, tc.wantLookups, err)
			}
			if tc.name == "409 is final" {
				if sandbox.CodeOf(err) != sandbox.AlreadyExists {
					t.Errorf("err %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.found && out.ID != "sb-2" {
				t.Errorf("out %+v", out)
			}
		})
	}
}

func TestDeadlineOnEveryCall(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c, err := cloudhttp.New(cloudhttp.Options{Provider: "fake", BaseURL: srv.URL, Timeout: 50 * time.Millisecond, Attempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), cloudhttp.Request{Op: "fake.slow", Method: "POST", Path: "/slow"}, nil)
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("err %v, want DeadlineExceeded", err)
	}
}

func TestRefusedConnectionIsRetriedEvenForPOST(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: every dial is refused
	w := &testutil.Sleeps{}
	c := client(t, "http://"+addr, w, nil)
	_, err = c.Do(context.Background(), cloudhttp.Request{Op: "fake.create", Method: "POST", Path: "/x"}, nil)
	if sandbox.CodeOf(err) != sandbox.Unavailable || len(w.All()) != 3 {
		t.Fatalf("err %v after %d waits, want Unavailable after 3", err, len(w.All()))
	}
}

func TestDecodesJSONAndBadJSONIsInternal(t *testing.T) {
	srv, _ := script(t, status(200, `{"id":"sb-9","state":"running"}`), status(200, `not json`))
	c := client(t, srv.URL, &testutil.Sleeps{}, nil)
	var out struct{ ID, State string }
	if _, err := c.Do(context.Background(), cloudhttp.Request{Op: "fake.get", Path: "/a"}, &out); err != nil || out.ID != "sb-9" {
		t.Fatalf("%v %+v", err, out)
	}
	if _, err := c.Do(context.Background(), cloudhttp.Request{Op: "fake.get", Path: "/a"}, &out); sandbox.CodeOf(err) != sandbox.Internal {
		t.Fatalf("err %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "::"} {
		if _, err := cloudhttp.New(cloudhttp.Options{BaseURL: u}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("%q: %v", u, err)
		}
	}
	c, _ := cloudhttp.New(cloudhttp.Options{BaseURL: "http://127.0.0.1:1"})
	if _, err := c.Do(context.Background(), cloudhttp.Request{Path: "http://evil.example/x"}, nil); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("an absolute path must be refused: %v", err)
	}
}

func TestStreamAndWebSocketCarryAuth(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/logs", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", 401)
			return
		}
		for i := range 3 {
			_ = json.NewEncoder(w).Encode(map[string]int{"line": i})
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "no", 401)
			return
		}
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		typ, b, err := conn.Read(r.Context())
		if err == nil {
			_ = conn.Write(r.Context(), typ, append([]byte("echo:"), b...))
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := client(t, srv.URL, &testutil.Sleeps{}, nil)
	ctx := context.Background()
	resp, err := c.Stream(ctx, cloudhttp.Request{Op: "fake.logs", Path: "/logs"})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Count(string(body), "\n") != 3 {
		t.Errorf("stream %q", body)
	}
	conn, err := c.Dial(ctx, "fake.exec", "/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if err := conn.Write(ctx, websocket.MessageBinary, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	_, b, err := conn.Read(ctx)
	if err != nil || string(b) != "echo:hi" {
		t.Fatalf("%q %v", b, err)
	}
	bad, _ := cloudhttp.New(cloudhttp.Options{Provider: "fake", BaseURL: srv.URL})
	if _, err := bad.Dial(ctx, "fake.exec", "/ws", nil); sandbox.CodeOf(err) != sandbox.PermissionDenied {
		t.Errorf("upgrade without auth: %v", err)
	}
}
