package kubernetes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/sandbox"
)

// kubeconfigPathFile is where scripts/setup-k8s.sh writes the path of the
// test cluster's admin kubeconfig.
const kubeconfigPathFile = "/tmp/corral-k8s.kubeconfig-path"

// runLabel marks every Pod this test binary makes, so the end of the run
// can prove nothing was left behind.
const runLabel = "corral-test-run"

var runID = func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// kubeconfig is the test cluster's kubeconfig: CORRAL_TEST_KUBECONFIG,
// else the path scripts/setup-k8s.sh wrote.
func kubeconfig() string {
	if v := os.Getenv("CORRAL_TEST_KUBECONFIG"); v != "" {
		return v
	}
	if b, err := os.ReadFile(kubeconfigPathFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// gate checks once whether the test cluster answers.
var gate = sync.OnceValue(func() error {
	kc := kubeconfig()
	if kc == "" {
		return fmt.Errorf("kubernetes: no test cluster (set CORRAL_TEST_KUBECONFIG or run scripts/setup-k8s.sh)")
	}
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: kc})
	if err != nil {
		return fmt.Errorf("kubernetes: kubeconfig %s: %w", kc, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return fmt.Errorf("kubernetes: the test cluster of %s does not answer (scripts/setup-k8s.sh starts it): %w", kc, err)
	}
	return nil
})

// requireCluster skips the test when no cluster answers, and fails it
// instead under CI=true.
func requireCluster(t testing.TB) {
	t.Helper()
	if err := gate(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %v", err)
		}
		t.Skip(err.Error())
	}
}

// newProvider returns a provider on the test cluster whose Pods carry the
// run label.
func newProvider(t testing.TB, opts kubernetes.Options) *kubernetes.Provider {
	t.Helper()
	requireCluster(t)
	opts.Kubeconfig = kubeconfig()
	labels := map[string]string{runLabel: runID}
	for k, v := range opts.Labels {
		labels[k] = v
	}
	opts.Labels = labels
	p, err := kubernetes.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// create makes a sandbox that is destroyed when the test ends.
func create(t testing.TB, p sandbox.Provider, opts sandbox.CreateOptions) sandbox.Handle {
	t.Helper()
	h, err := p.Create(context.Background(), opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Destroy(ctx); err != nil {
			t.Errorf("Destroy %s: %v", h.ID(), err)
		}
	})
	return h
}

// TestMain fails the run if any Pod of it was left behind (and removes
// them).
func TestMain(m *testing.M) {
	code := m.Run()
	if gate() == nil {
		if err := sweep(); err != nil {
			fmt.Fprintln(os.Stderr, "kubernetes tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func sweep() error {
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: kubeconfig()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	list, err := p.List(ctx, map[string]string{runLabel: runID})
	if err != nil {
		return err
	}
	var left []string
	for _, s := range list {
		left = append(left, s.ID)
		_ = p.Destroy(ctx, s.ID)
	}
	if len(left) > 0 {
		return fmt.Errorf("tests left pods behind: %s", strings.Join(left, ", "))
	}
	return nil
}
