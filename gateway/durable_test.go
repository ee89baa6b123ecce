package gateway_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/gateway"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// TestBrokeredRunSurvivesItsProcess: the process that started a run with
// a brokered key goes away (its runner detaches, its gateway stops); a
// second process with the same gateway key, on the same address and
// store, takes the run over, and the agent's model call, made after the
// switch with the placeholder it got at start, authenticates.
func TestBrokeredRunSurvivesItsProcess(t *testing.T) {
	key := canary()
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{{Text: "answered by the second process"}}})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{"ANTHROPIC_API_KEY": key})
	secrets, _ = secrets.WithBrokers(map[string]sandbox.Broker{"ANTHROPIC_API_KEY": {Hosts: []string{model.URL}, Header: "x-api-key"}})
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{Secrets: secrets}}
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	gwKey := gateway.NewKey()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	journals := filepath.Join(t.TempDir(), "journals")
	process := func(ln net.Listener) (*run.Runner, *http.Server) {
		g, err := gateway.New(gateway.Options{Key: gwKey, Runs: st, Reach: map[string]string{"local": "http://" + addr},
			Definition: func(string) (*sandbox.Definition, bool) { return def, true }})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: g, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close() })
		r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{command.Harness{}}, run.Options{Broker: g, LeaseTTL: 2 * time.Second,
			PollInterval: 50 * time.Millisecond, JournalDir: journals})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r, srv
	}
	rA, srvA := process(ln)
	goFile := filepath.Join(t.TempDir(), "go")
	agent := `echo started; i=0; while [ ! -e "$GO_FILE" ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done
code=$(curl -sS -o resp.json -w '%{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' \
  -d '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages")
echo "status=$code"; tr -d '\n' < resp.json; echo`
	ctx := ctxT(t)
	rec, err := rA.Start(ctx, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", agent}, Env: map[string]string{"GO_FILE": goFile}})
	if err != nil {
		t.Fatal(err)
	}
	kA := &kit{st: st}
	waitFor(t, kA, rec.ID, regexp.MustCompile(`(started)`))
	// The first process goes away: its runner detaches, its gateway stops.
	if err := rA.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_ = srvA.Close()
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the gateway's address is not free again: %v", err)
	}
	rB, _ := process(ln2)
	if err := rB.TakeOver(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rB.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	text := runText(t, kA, rec.ID)
	if got, _, _ := st.GetRun(ctx, rec.ID); got.Status != store.RunCompleted {
		t.Fatalf("run %s (%s):\n%s", got.Status, got.Error, text)
	}
	if !strings.Contains(text, "status=200") || !strings.Contains(text, "answered by the second process") || model.Unauthorized() != 0 {
		t.Fatalf("the call after the switch did not authenticate:\n%s", text)
	}
}
