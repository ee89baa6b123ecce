package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestMetricsDecorator: the metrics observe Exec through the guard's
// decorator hook, on handles and their forks, once each, on a provider
// guarded once (the registry's guard and the daemon's compose).
func TestMetricsDecorator(t *testing.T) {
	lp, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m := server.NewMetrics()
	registryGuarded := sandbox.Guard(lp, sandbox.GuardOptions{})
	p := sandbox.Guard(registryGuarded, sandbox.GuardOptions{Decorate: m.Decorator(registryGuarded.Name())})
	if u := p.(sandbox.ProviderWrapper).Unwrap(); u != sandbox.Provider(lp) {
		t.Fatalf("the daemon's guard wraps %T, want the local provider itself (one guard)", u)
	}
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	fork, err := h.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fork.Destroy(context.Background()) })
	for _, hh := range []sandbox.Handle{h, fork} {
		if _, ok := hh.(sandbox.HandleWrapper); !ok {
			t.Fatalf("%T is not a decorator over the guard", hh)
		}
		if res, err := hh.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %v %v", res, err)
		}
	}
	rec := httptest.NewRecorder()
	m.Handler(memstore.New(memstore.Options{})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	line := regexp.MustCompile(`(?m)^corral_exec_seconds_count\{provider="local"\} (\d+)$`).FindStringSubmatch(rec.Body.String())
	if line == nil || line[1] != "2" {
		t.Fatalf("corral_exec_seconds_count for local: %v, want 2 (one exec on the handle, one on its fork)", line)
	}
	t.Logf("execs observed: %s of 2 (handle + fork)", line[1])
}
