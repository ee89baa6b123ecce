package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
)

// TestKubernetesSandboxCommands runs corral exec --keep --provider
// kubernetes on the real test cluster, in a namespace of its own that
// also holds another client's Pod: corral sandbox ls lists corral's
// sandboxes only, rm removes one, prune the rest, and the other Pod is
// left alone. It runs in Pods mode and in Sandbox mode (agent-sandbox's
// claims).
func TestKubernetesSandboxCommands(t *testing.T) {
	for _, mode := range []string{"pods", "sandbox"} {
		t.Run(mode, func(t *testing.T) { sandboxCommandsTrial(t, mode) })
	}
}

func sandboxCommandsTrial(t *testing.T, mode string) {
	kc := k8stest.Require(t)
	if mode == "sandbox" {
		k8stest.RequireAgentSandbox(t)
	}
	ns := k8stest.Namespace(t)
	cs := k8stest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "not-corral", Labels: map[string]string{"team": "other"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: kubernetes.DefaultImage,
			ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "3600"}}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--provider", "kubernetes", "--kubeconfig", kc, "--namespace", ns, "--k8s-mode", mode}
	var kept []string
	for i := range 2 {
		out, errOut, code := corral(t, append([]string{"exec", "--keep"}, append(flags, "--", "sh", "-c", fmt.Sprintf("echo from-k8s-%d; exit 3", i))...)...)
		_, after, ok := strings.Cut(errOut, "sandbox kept: ")
		id, _, _ := strings.Cut(strings.TrimSpace(after), " ")
		if code != 3 || out != fmt.Sprintf("from-k8s-%d\n", i) || !ok {
			t.Fatalf("exec %d: exit %d, stdout %q, stderr %q", i, code, out, errOut)
		}
		kept = append(kept, id)
	}
	ls := func() []string {
		t.Helper()
		out, errOut, code := corral(t, append([]string{"sandbox", "ls", "--json"}, flags...)...)
		var rows []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
			t.Fatalf("ls: exit %d: %s %s", code, out, errOut)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		return ids
	}
	want := slices.Clone(kept)
	slices.Sort(want)
	if got := ls(); !slices.Equal(got, want) {
		t.Fatalf("ls lists %v, want corral's %v", got, want)
	}
	if out, errOut, code := corral(t, append([]string{"sandbox", "rm", kept[0]}, flags...)...); code != 0 || strings.TrimSpace(out) != kept[0] {
		t.Fatalf("rm %s: exit %d: %s %s", kept[0], code, out, errOut)
	}
	if got := ls(); !slices.Equal(got, kept[1:]) {
		t.Fatalf("after rm, ls lists %v, want %v", got, kept[1:])
	}
	out, errOut, code := corral(t, append([]string{"sandbox", "prune"}, flags...)...)
	if code != 0 || !strings.Contains(out+errOut, kept[1]) {
		t.Fatalf("prune: exit %d: %s %s", code, out, errOut)
	}
	if got := ls(); len(got) != 0 {
		t.Fatalf("after prune, ls lists %v", got)
	}
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range pods.Items {
		left = append(left, p.Name)
	}
	t.Logf("kept %v; rm removed %s, prune %s; pods left in %s: %v", kept, kept[0], kept[1], ns, left)
	if !slices.Equal(left, []string{"not-corral"}) {
		t.Fatalf("pods left %v, want only another client's not-corral", left)
	}
}

// TestKubernetesCrashTakeover runs `corral run` with provider: kubernetes
// on the real test cluster, SIGKILLs the driving corral mid-run, and
// `corral attach` from another process must deliver every line exactly
// once with the agent's exit code (crashTrial's checks), in Pods mode and
// in Sandbox mode. CORRAL_CRASH_TRIALS sets the number of trials (default
// 3 per mode).
func TestKubernetesCrashTakeover(t *testing.T) {
	trials := crashTrialsFromEnv(3)
	for _, mode := range []string{"pods", "sandbox"} {
		t.Run(mode, func(t *testing.T) {
			kc := k8stest.Require(t)
			if mode == "sandbox" {
				k8stest.RequireAgentSandbox(t)
			}
			ns := k8stest.Namespace(t)
			crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: kubernetes\n  kubernetes: {kubeconfig: %q, namespace: %s, mode: %s}\n", kc, ns, mode), trials)
			pods, err := k8stest.Client(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d trials in namespace %s; pods left after corral down: %d", trials, ns, len(pods.Items))
			if len(pods.Items) != 0 {
				t.Errorf("corral down left %d pods", len(pods.Items))
			}
		})
	}
}

// TestKubernetesShapeFlags: the kubernetes provider's workspace, ports,
// deny and egress flags reach its options (a bad value is refused before the cluster
// is contacted, naming the option).
func TestKubernetesShapeFlags(t *testing.T) {
	for _, c := range []struct{ flag, value, want string }{
		{"--k8s-workspace", "nfs", "Options.Workspace"},
		{"--k8s-ports", "nodeport", "Options.Ports"},
		{"--k8s-deny", "iptables", "Options.DenyEnforcement"},
		{"--k8s-egress", "cilium", "Options.EgressPolicy"},
	} {
		_, errOut, code := corral(t, "sandbox", "ls", "--provider", "kubernetes", "--kubeconfig", "/nonexistent", c.flag, c.value)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s %s: exit %d, stderr %q, want an error naming %s", c.flag, c.value, code, errOut, c.want)
		}
	}
}
