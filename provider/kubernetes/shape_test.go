package kubernetes_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/sandbox"
)

// livePod returns the Pod behind a handle, read behind corral's back.
func livePod(t *testing.T, ctx context.Context, p *kubernetes.Provider, h sandbox.Handle) *corev1.Pod {
	t.Helper()
	name, ok := kubernetes.PodName(h)
	if !ok {
		t.Fatalf("%T is not a kubernetes handle", h)
	}
	pod, err := k8stest.Client(t).CoreV1().Pods(p.Namespace()).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// sh runs a shell command in the sandbox and returns its result.
func sh(t *testing.T, ctx context.Context, h sandbox.Handle, script string) *sandbox.ExecResult {
	t.Helper()
	res, err := h.Exec(ctx, sandbox.Command{Shell: script})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	return res
}

// TestShapeReachesLivePod: a toleration, an image pull secret and an
// annotation given as options are on the running Pod, in Pods mode and
// (through corral's SandboxTemplate) in Sandbox mode.
func TestShapeReachesLivePod(t *testing.T) {
	tol := corev1.Toleration{Key: "corral.dev/test-taint", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	opts := kubernetes.Options{Tolerations: []corev1.Toleration{tol},
		ImagePullSecrets: []string{"corral-test-pull"}, Annotations: map[string]string{"corral-test/run": runID}}
	t.Run("pods", func(t *testing.T) { checkShape(t, newProvider(t, opts), tol) })
	t.Run("sandbox", func(t *testing.T) { checkShape(t, sandboxModeProvider(t, opts), tol) })
}

func checkShape(t *testing.T, p *kubernetes.Provider, tol corev1.Toleration) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pod := livePod(t, ctx, p, testutil.Create(t, p, sandbox.CreateOptions{}))
	if !slices.ContainsFunc(pod.Spec.Tolerations, func(x corev1.Toleration) bool { return x.MatchToleration(&tol) }) {
		t.Errorf("tolerations %v lack %v", pod.Spec.Tolerations, tol)
	}
	if len(pod.Spec.ImagePullSecrets) != 1 || pod.Spec.ImagePullSecrets[0].Name != "corral-test-pull" {
		t.Errorf("image pull secrets %v", pod.Spec.ImagePullSecrets)
	}
	if pod.Annotations["corral-test/run"] != runID {
		t.Errorf("annotations %v", pod.Annotations)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s", pod.Status.Phase)
	}
}

// hostServer serves "reached" on every address of the host and returns
// its port.
func hostServer(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "reached") }),
		ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// reach is the shell text that fetches the host server at addr:port and
// prints what came (busybox nc: the static busybox's wget crashes).
func reach(addr string, port int) string {
	return fmt.Sprintf(`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 %s %d 2>&1; echo " exit=$?"`, addr, port)
}

// nodeAddress gives the node an address on the pod network, on its bridge,
// and returns it. The test cluster's bridge CNI gives the bridge none and
// Pods no gateway, and the host's FORWARD policy (Docker's DROP) stops
// traffic between Pods, so without it a Pod reaches nothing off itself
// and "an allowed sandbox reaches a server" could not be shown. h is an
// allowed sandbox (its route names the pod subnet). The address goes when
// the test ends.
func nodeAddress(t *testing.T, ctx context.Context, h sandbox.Handle) string {
	t.Helper()
	route := strings.TrimSpace(string(sh(t, ctx, h, "ip route | awk '/dev eth0/ && !/^default/ {print $1; exit}'").Stdout))
	_, subnet, err := net.ParseCIDR(route)
	if err != nil || subnet.IP.To4() == nil {
		t.Fatalf("the allowed sandbox's pod route %q: %v", route, err)
	}
	ip := subnet.IP.To4()
	node := net.IPv4(ip[0], ip[1], ip[2], ip[3]+1) // the subnet's gateway address, which host-local never hands out
	ones, _ := subnet.Mask.Size()
	cidr := fmt.Sprintf("%s/%d", node, ones)
	br, err := net.InterfaceByName(k8stest.PodBridge)
	if err != nil {
		testutil.Unavailable(t, "kubernetes: no pod bridge "+k8stest.PodBridge+" on this host (the node is elsewhere): "+err.Error())
	}
	addrs, _ := br.Addrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(node) {
			return node.String()
		}
	}
	if out, err := exec.CommandContext(ctx, "ip", "addr", "add", cidr, "dev", k8stest.PodBridge).CombinedOutput(); err != nil {
		testutil.Unavailable(t, fmt.Sprintf("kubernetes: cannot give the node %s on %s (needs root): %v %s", cidr, k8stest.PodBridge, err, out))
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", cidr, "dev", k8stest.PodBridge).Run() })
	return node.String()
}

// TestNetworkDeny: an allowed sandbox reaches a server on the node's
// address; a denied one (Pods and Sandbox mode) does not, has no route,
// cannot bring its interface back up, and still runs commands and serves a
// port through port-forward. Its NetworkPolicy selects it and goes with
// it. (The test cluster's bridge CNI does not enforce NetworkPolicies:
// what cuts the denied sandbox off here is the init container.)
func TestNetworkDeny(t *testing.T) {
	port := hostServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	p := newProvider(t, kubernetes.Options{})
	allow := testutil.Create(t, p, sandbox.CreateOptions{})
	gw := nodeAddress(t, ctx, allow)
	if out := string(sh(t, ctx, allow, reach(gw, port)).Stdout); !strings.Contains(out, "reached exit=0") {
		t.Fatalf("the allowed sandbox does not reach the node's server at %s:%d: %q", gw, port, out)
	}
	t.Run("pods", func(t *testing.T) { checkDenied(t, ctx, p, gw, port, true) })
	t.Run("sandbox", func(t *testing.T) { checkDenied(t, ctx, sandboxModeProvider(t, kubernetes.Options{}), gw, port, false) })
}

// checkDenied makes a denied sandbox with p and tries to get out.
func checkDenied(t *testing.T, ctx context.Context, p *kubernetes.Provider, gw string, port int, ports bool) {
	h, err := p.Create(ctx, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = h.Destroy(ctx)
	})
	if pod := livePod(t, ctx, p, h); len(pod.Spec.InitContainers) != 1 {
		t.Errorf("the denied pod's init containers: %v", pod.Spec.InitContainers)
	}
	if out := string(sh(t, ctx, h, reach(gw, port)).Stdout); strings.Contains(out, "reached") || strings.Contains(out, "exit=0") {
		t.Errorf("the denied sandbox reached the node's server: %q", out)
	}
	if out := strings.TrimSpace(string(sh(t, ctx, h, "ip route; ip -6 route 2>/dev/null | grep -v '^$' ; true").Stdout)); out != "" {
		t.Errorf("the denied sandbox has routes: %q", out)
	}
	res := sh(t, ctx, h, "ip link set eth0 up; echo exit=$?; cat /sys/class/net/eth0/operstate")
	if out := string(res.Stdout); strings.Contains(out, "exit=0") || !strings.HasSuffix(out, "down\n") {
		t.Errorf("the sandbox container brought eth0 up: %q %q", out, res.Stderr)
	}
	pod := livePod(t, ctx, p, h)
	np, err := k8stest.Client(t).NetworkingV1().NetworkPolicies(p.Namespace()).Get(ctx, h.ID()+"-deny", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the deny NetworkPolicy: %v", err)
	}
	if np.Spec.PodSelector.MatchLabels[kubernetes.LabelSandboxID] != pod.Labels[kubernetes.LabelSandboxID] ||
		len(np.Spec.Ingress)+len(np.Spec.Egress) != 0 || len(np.OwnerReferences) != 1 || np.OwnerReferences[0].UID != pod.UID {
		t.Errorf("the NetworkPolicy %+v does not deny the pod %s (labels %v)", np.Spec, pod.Name, pod.Labels)
	}
	if ports {
		ep := serveWWW(t, ctx, h)
		waitServed(t, ctx, ep.URL+"/index.html", "served\n") // port-forward into the denied sandbox
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := k8stest.Client(t).NetworkingV1().NetworkPolicies(p.Namespace()).Get(ctx, np.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the NetworkPolicy after Destroy: %v, want NotFound", err)
	}
}

// get GETs url once (3 s at most) and returns the body of a 200.
func get(ctx context.Context, url string) (string, error) {
	c := http.Client{Timeout: 3 * time.Second}
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("status %s", resp.Status)
	}
	return string(body), err
}

// waitServed waits (testutil.WaitFor) until url answers 200 with want: a
// forwarder or a Pod address can take a moment to answer after the Pod
// is Running.
func waitServed(t *testing.T, ctx context.Context, url, want string) {
	t.Helper()
	var last error
	testutil.WaitFor(t, ctx, url+" to serve "+strconv.Quote(want), 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		body, err := get(ctx, url)
		if err != nil {
			last = err
			return false, nil
		}
		if body != want {
			return false, fmt.Errorf("%s served %q, want %q (last error %v)", url, body, want, last)
		}
		return true, nil
	})
}

// serveWWW serves a file (www/index.html: "served\n") from the sandbox on
// port 8080 with BusyBox httpd until the test ends, and returns the port's
// endpoint.
func serveWWW(t *testing.T, ctx context.Context, h sandbox.Handle) sandbox.Endpoint {
	t.Helper()
	sh(t, ctx, h, "mkdir -p www && echo served > www/index.html")
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: "httpd -f -p 8080 -h www"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.Kill(context.Background(), 0) })
	ep, err := h.ConnectPort(ctx, 8080)
	if err != nil {
		t.Fatal(err)
	}
	return ep
}
