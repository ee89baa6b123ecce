package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/sandbox"
)

// The benchmarks come in pairs: corral's path, and the floor, the same
// work done with client-go directly (a bare Pod polled to Running, one
// WebSocket exec). No timing is asserted.

// floor is raw client-go on the test cluster, in a namespace of its own.
type floor struct {
	cfg *rest.Config
	cs  k8s.Interface
	ns  string
}

func newFloor(b *testing.B) *floor {
	b.Helper()
	return &floor{cfg: k8stest.Config(b), cs: k8stest.Client(b), ns: k8stest.Namespace(b)}
}

// createRunning makes a bare Pod of the default image and polls it (every
// 10 ms) until it runs. (A watch is no floor on this cluster: its watch
// cache lags a fresh namespace's writes and answers "Too large resource
// version".)
func (f *floor) createRunning(ctx context.Context, b *testing.B) string {
	var r [6]byte
	_, _ = rand.Read(r[:])
	name := "floor-" + hex.EncodeToString(r[:])
	var zero int64
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{Name: "c", Image: kubernetes.DefaultImage, ImagePullPolicy: corev1.PullNever,
			Command: []string{"sleep", "3600"}}}}}
	if _, err := f.cs.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for {
		p, err := f.cs.CoreV1().Pods(f.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning {
			return name
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exec runs argv in the Pod over one WebSocket exec.
func (f *floor) exec(ctx context.Context, b *testing.B, pod string, argv ...string) {
	req := f.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(f.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exe, err := remotecommand.NewWebSocketExecutor(f.cfg, "GET", req.URL().String())
	if err != nil {
		b.Fatal(err)
	}
	var out, errb bytes.Buffer
	if err := exe.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errb}); err != nil {
		b.Fatalf("floor exec: %v (%s)", err, errb.String())
	}
}

func (f *floor) delete(ctx context.Context, b *testing.B, pod string) {
	var zero int64
	if err := f.cs.CoreV1().Pods(f.ns).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCreateFirstCommand: from nothing to the first command's result
// (Create + Exec of true), against a bare Pod polled to Running and one
// exec. Deleting is outside the timer.
func BenchmarkCreateFirstCommand(b *testing.B) {
	p := newProvider(b, kubernetes.Options{})
	f := newFloor(b)
	b.Run("corral", func(b *testing.B) { createFirst(b, p, func() {}) })
	b.Run("floor", func(b *testing.B) { f.createFirst(b) })
}

// createFirst times Create + Exec of true b.N times; before (outside the
// timer) runs ahead of each, and Destroy after.
func createFirst(b *testing.B, p *kubernetes.Provider, before func()) {
	ctx := context.Background()
	b.ResetTimer() // what was set up before is not timed
	for range b.N {
		b.StopTimer()
		before()
		b.StartTimer()
		h, err := p.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		b.StopTimer()
		if err := h.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// createFirst is the floor's: a bare Pod polled to Running and one exec,
// b.N times (deleting outside the timer).
func (f *floor) createFirst(b *testing.B) {
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		pod := f.createRunning(ctx, b)
		f.exec(ctx, b, pod, "true")
		b.StopTimer()
		f.delete(ctx, b, pod)
		b.StartTimer()
	}
}

// BenchmarkExecRoundTrip: one Exec of true in a running sandbox, against
// one raw WebSocket exec of true in a bare Pod.
func BenchmarkExecRoundTrip(b *testing.B) {
	p := newProvider(b, kubernetes.Options{})
	h := testutil.Create(b, p, sandbox.CreateOptions{})
	f := newFloor(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pod := f.createRunning(ctx, b)
	b.Run("corral", func(b *testing.B) {
		for range b.N {
			if res, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil || res.ExitCode != 0 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		for range b.N {
			f.exec(ctx, b, pod, "true")
		}
	})
}

// BenchmarkSandboxModeClaim: create → first command in Sandbox mode, a
// claim served from a warm pool against a cold claim (no pool: the
// Sandbox controller makes the Pod), with Pods mode's cold create and the
// raw bare Pod as the floor. Destroying, and the pool refilling, are
// outside the timer.
func BenchmarkSandboxModeClaim(b *testing.B) {
	k8stest.RequireAgentSandbox(b)
	ctx := context.Background()
	b.Run("warm-claim", func(b *testing.B) {
		const pool = 2
		p := sandboxModeProvider(b, kubernetes.Options{WarmPool: pool})
		cs := k8stest.Client(b)
		// A first claim makes the template and the pool.
		h, err := p.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		_ = h.Destroy(ctx)
		createFirst(b, p, func() {
			for {
				pods, err := cs.CoreV1().Pods(p.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: "agents.x-k8s.io/pool"})
				if err != nil {
					b.Fatal(err)
				}
				ready := 0
				for _, pd := range pods.Items {
					if pd.Status.Phase == corev1.PodRunning && pd.DeletionTimestamp == nil {
						ready++
					}
				}
				if ready >= pool {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	})
	b.Run("cold-claim", func(b *testing.B) {
		createFirst(b, sandboxModeProvider(b, kubernetes.Options{}), func() {})
	})
	b.Run("cold-pod", func(b *testing.B) {
		createFirst(b, newProvider(b, kubernetes.Options{}), func() {})
	})
	b.Run("floor", func(b *testing.B) { newFloor(b).createFirst(b) })
}
