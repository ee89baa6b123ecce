// Package k8stest gives tests the real test cluster scripts/setup-k8s.sh
// starts: its kubeconfig, the gate that skips (or fails under CI=true)
// when it does not answer, a client for looking behind corral's back and
// throw-away namespaces.
package k8stest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/d10ffeed/corral/internal/testutil"
)

// KubeconfigPathFile is where scripts/setup-k8s.sh writes the path of the
// test cluster's admin kubeconfig.
const KubeconfigPathFile = "/tmp/corral-k8s.kubeconfig-path"

// Kubeconfig is the test cluster's kubeconfig: CORRAL_TEST_KUBECONFIG,
// else the path scripts/setup-k8s.sh wrote, else "".
func Kubeconfig() string {
	if v := os.Getenv("CORRAL_TEST_KUBECONFIG"); v != "" {
		return v
	}
	if b, err := os.ReadFile(KubeconfigPathFile); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// PodBridge is the host-side bridge of the test cluster's pod network
// (scripts/setup-k8s.sh's bridge CNI, which gives it no address: Pods
// have no gateway).
const PodBridge = "corral0"

// config is the test cluster's client configuration, read once.
var config = sync.OnceValues(func() (*rest.Config, error) {
	kc := Kubeconfig()
	if kc == "" {
		return nil, fmt.Errorf("kubernetes: no test cluster (set CORRAL_TEST_KUBECONFIG or run scripts/setup-k8s.sh)")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: kubeconfig %s: %w", kc, err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
})

// gate checks once whether the test cluster answers and keeps its client.
var gate = sync.OnceValues(func() (kubernetes.Interface, error) {
	cfg, err := config()
	if err != nil {
		return nil, err
	}
	kc := Kubeconfig()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: kubeconfig %s: %w", kc, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("kubernetes: the test cluster of %s does not answer (scripts/setup-k8s.sh starts it): %w", kc, err)
	}
	return cs, nil
})

// Available reports whether the test cluster answers (no test needed).
func Available() bool {
	_, err := gate()
	return err == nil
}

// Require skips the test when the test cluster does not answer (fails it
// under CI=true) and returns its kubeconfig path.
func Require(t testing.TB) string {
	t.Helper()
	if _, err := gate(); err != nil {
		testutil.Unavailable(t, err.Error())
	}
	return Kubeconfig()
}

// Client returns a client of the test cluster (Require first).
func Client(t testing.TB) kubernetes.Interface {
	t.Helper()
	Require(t)
	cs, _ := gate()
	return cs
}

// AgentSandboxReadyURL is the readiness probe of the agent-sandbox
// controller scripts/setup-agent-sandbox.sh starts.
const AgentSandboxReadyURL = "http://127.0.0.1:18081/readyz"

// RequireAgentSandbox is Require plus agent-sandbox: its CRDs (the
// extensions group) and its controller answering AgentSandboxReadyURL,
// as scripts/setup-agent-sandbox.sh installs and starts them.
func RequireAgentSandbox(t testing.TB) string {
	t.Helper()
	kc := Require(t)
	cs, _ := gate()
	if _, err := cs.Discovery().ServerResourcesForGroupVersion("extensions.agents.x-k8s.io/v1alpha1"); err != nil {
		testutil.Unavailable(t, "kubernetes: agent-sandbox is not installed on the test cluster (scripts/setup-agent-sandbox.sh installs it): "+err.Error())
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(AgentSandboxReadyURL)
	if err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
	}
	if err != nil {
		testutil.Unavailable(t, "kubernetes: the agent-sandbox controller does not answer "+AgentSandboxReadyURL+" (scripts/setup-agent-sandbox.sh starts it): "+err.Error())
	}
	return kc
}

// Config returns a copy of the test cluster's client configuration
// (Require first).
func Config(t testing.TB) *rest.Config {
	t.Helper()
	Require(t)
	cfg, _ := config()
	return rest.CopyConfig(cfg)
}

// Namespace makes a fresh namespace that is deleted, with all in it, when
// the test ends, and returns its name.
func Namespace(t testing.TB) string {
	t.Helper()
	cs := Client(t)
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "corral-test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var zero int64
		if err := cs.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Errorf("deleting namespace %s: %v", name, err)
		}
	})
	// Pods need the namespace's default service account, which the
	// controller manager makes a moment later.
	for {
		_, err := cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			return name
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespace %s has no default service account: %v", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
