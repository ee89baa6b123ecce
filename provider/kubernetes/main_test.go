package kubernetes_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
)

// runLabel marks every Pod this test binary makes, so the end of the run
// can prove nothing was left behind.
const runLabel = "corral-test-run"

var runID = func() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// newProvider returns a provider on the test cluster whose Pods carry the
// run label.
func newProvider(t testing.TB, opts kubernetes.Options) *kubernetes.Provider {
	t.Helper()
	opts.Kubeconfig = k8stest.Require(t)
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

// TestMain fails the run if any Pod of it was left behind (and removes
// them).
func TestMain(m *testing.M) {
	code := m.Run()
	if k8stest.Available() {
		if err := sweep(); err != nil {
			fmt.Fprintln(os.Stderr, "kubernetes tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func sweep() error {
	p, err := kubernetes.New(kubernetes.Options{Kubeconfig: k8stest.Kubeconfig()})
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
