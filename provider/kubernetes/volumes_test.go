package kubernetes_test

import (
	"context"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/sandbox"
)

// TestPortsService: with Ports service, ConnectPort makes a ClusterIP
// Service owned by the Pod whose endpoints are the Pod, returns its
// cluster address, and Destroy deletes it. Whether the host reaches the
// cluster IP depends on kube-proxy (the test cluster runs none): the
// test logs it and does not require it.
func TestPortsService(t *testing.T) {
	p := newProvider(t, kubernetes.Options{Ports: kubernetes.PortsService})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	ep := serveWWW(t, ctx, h)
	again, err := h.ConnectPort(ctx, 8080)
	if err != nil || again.URL != ep.URL {
		t.Fatalf("a second ConnectPort: %v %v, want %s", again, err, ep.URL)
	}
	pod := livePod(t, ctx, p, h)
	cs := k8stest.Client(t)
	svc, err := cs.CoreV1().Services(p.Namespace()).Get(ctx, h.ID()+"-8080", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(ep.URL)
	if err != nil || u.Hostname() != svc.Spec.ClusterIP || u.Port() != "8080" {
		t.Fatalf("endpoint %s is not the service's cluster address %s:8080", ep.URL, svc.Spec.ClusterIP)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != pod.UID || svc.Labels[kubernetes.LabelManaged] != "true" {
		t.Errorf("service metadata %+v", svc.ObjectMeta)
	}
	// The EndpointSlice controller puts the Pod behind the Service.
	testutil.WaitFor(t, ctx, "the service's endpoints to hold the pod's address "+pod.Status.PodIP, 200*time.Millisecond, func(ctx context.Context) (bool, error) {
		sl, err := cs.DiscoveryV1().EndpointSlices(p.Namespace()).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		return err == nil && slicesHold(sl.Items, pod.Status.PodIP), err
	})
	// The Service's endpoint (the Pod's address, reached from the node
	// once it has an address on the pod bridge) serves; the host reaches
	// the cluster IP only where kube-proxy runs.
	nodeAddress(t, ctx, h)
	waitServed(t, ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, "8080")+"/index.html", "served\n")
	if body, err := get(ctx, ep.URL+"/index.html"); err == nil {
		t.Logf("the host reaches the cluster IP %s: %q", ep.URL, body)
	} else {
		t.Logf("the host does not reach the cluster IP %s (no kube-proxy on the test node): %v", ep.URL, err)
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Services(p.Namespace()).Get(ctx, svc.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the service after Destroy: %v, want NotFound", err)
	}
}

// slicesHold reports whether an endpoint of the slices has the address.
func slicesHold(slices []discoveryv1.EndpointSlice, addr string) bool {
	for _, s := range slices {
		for _, e := range s.Endpoints {
			for _, a := range e.Addresses {
				if a == addr {
					return true
				}
			}
		}
	}
	return false
}

// localVolume makes a hostPath PersistentVolume of a storage class of its
// own (the test cluster has no dynamic provisioner) on a directory of the
// test's, deleted when the test ends, and returns the class and the
// directory.
func localVolume(t *testing.T, ctx context.Context) (string, string) {
	t.Helper()
	cs := k8stest.Client(t)
	dir := t.TempDir()
	class := "corral-test-" + runID
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: class, Labels: map[string]string{runLabel: runID}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              class,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirOrCreate}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, class, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the persistent volume: %v", err)
		}
	})
	return class, dir
}

// TestWorkspacePVC: with a pvc workspace the files outlive the Pod:
// deleting the Pod behind corral's back and resuming makes a new Pod on
// the same claim with the files there; Destroy deletes the Pod and the
// claim, after which the sandbox is NotFound.
func TestWorkspacePVC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cs := k8stest.Client(t)
	classes, err := cs.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("storage classes on the cluster: %d (a static hostPath volume is used either way)", len(classes.Items))
	class, dir := localVolume(t, ctx)
	p := newProvider(t, kubernetes.Options{Workspace: kubernetes.WorkspacePVC, StorageClass: class, WorkspaceSize: "64Mi"})
	if !p.Capabilities().DurableFilesystem {
		t.Fatal("a pvc workspace does not claim durableFilesystem")
	}
	key := "ws/" + runID
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = p.Destroy(ctx, key)
	})
	if err := h.FS().WriteFile(ctx, "kept.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "kept.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("the file is not on the volume: %q, %v", b, err)
	}
	old := livePod(t, ctx, p, h)
	var zero int64
	if err := cs.CoreV1().Pods(p.Namespace()).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, ctx, "the deletion of pod "+old.Name, 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(p.Namespace()).Get(ctx, old.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	list, err := p.List(ctx, map[string]string{kubernetes.LabelSandboxID: h.ID()})
	if err != nil || len(list) != 1 || list[0].State != "Stopped" || list[0].Key != key {
		t.Errorf("List of a sandbox whose pod is gone: %+v, %v (want one, Stopped)", list, err)
	}
	if _, err := p.Create(ctx, sandbox.CreateOptions{ID: key}); sandbox.CodeOf(err) != sandbox.AlreadyExists {
		t.Fatalf("Create of a sandbox whose pod is gone but claim is not: %v, want AlreadyExists", err)
	}
	r, err := p.Resume(ctx, key)
	if err != nil {
		t.Fatalf("Resume after the pod was deleted: %v", err)
	}
	if r.ID() != h.ID() {
		t.Errorf("resumed id %s, want %s", r.ID(), h.ID())
	}
	if pod := livePod(t, ctx, p, r); pod.UID == old.UID {
		t.Errorf("the resumed sandbox runs in the deleted pod")
	}
	if b, err := r.FS().ReadFile(ctx, "kept.txt"); err != nil || string(b) != "kept" {
		t.Fatalf("the file after the pod was re-created: %q, %v", b, err)
	}
	if err := r.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(p.Namespace()).Get(ctx, h.ID()+"-workspace", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the workspace claim after Destroy: %v, want NotFound", err)
	}
	if _, err := p.Resume(ctx, key); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("Resume after Destroy: %v, want NotFound", err)
	}
}
