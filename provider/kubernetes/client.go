package kubernetes

import (
	"context"
	"encoding/json"
	"net/url"
	"path"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// The provider talks to the API server through a REST client of the core
// group only, not client-go's full clientset: the clientset links and
// registers every API group at start-up (about 8 ms and 25 MB of the
// corral binary, measured), and corral needs Pods, their exec subresource
// and Namespaces. The scheme is built on first use, not in an init.

// coreScheme is the scheme of core/v1 and the meta types, made once.
var coreScheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s, nil
})

// coreClient is the core/v1 REST client of one cluster.
type coreClient struct {
	rc    *rest.RESTClient
	param runtime.ParameterCodec
}

// newCoreClient makes the core/v1 client for cfg (which it does not
// change).
func newCoreClient(cfg *rest.Config) (*coreClient, error) {
	s, err := coreScheme()
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &coreClient{rc: rc, param: runtime.NewParameterCodec(s)}, nil
}

func (c *coreClient) getPod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	err := c.rc.Get().Namespace(ns).Resource("pods").Name(name).Do(ctx).Into(pod)
	return pod, err
}

func (c *coreClient) createPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	err := c.rc.Post().Namespace(pod.Namespace).Resource("pods").Body(pod).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	out := &corev1.PodList{}
	err := c.rc.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, c.param).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) deletePod(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	return c.rc.Delete().Namespace(ns).Resource("pods").Name(name).Body(&opts).Do(ctx).Error()
}

func (c *coreClient) getNamespace(ctx context.Context, name string) error {
	return c.rc.Get().Resource("namespaces").Name(name).Do(ctx).Error()
}

// execURL is the address of the exec subresource of a Pod's container.
func (c *coreClient) execURL(ns, pod string, opts *corev1.PodExecOptions) *url.URL {
	return c.rc.Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").VersionedParams(opts, c.param).URL()
}

// The other objects corral makes for a sandbox: Services and
// PersistentVolumeClaims (core/v1, typed) and NetworkPolicies
// (networking.k8s.io/v1, as JSON through the same client).

func (c *coreClient) createService(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
	out := &corev1.Service{}
	err := c.rc.Post().Namespace(svc.Namespace).Resource("services").Body(svc).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) getService(ctx context.Context, ns, name string) (*corev1.Service, error) {
	out := &corev1.Service{}
	err := c.rc.Get().Namespace(ns).Resource("services").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) listServices(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	out := &corev1.ServiceList{}
	err := c.rc.Get().Namespace(ns).Resource("services").VersionedParams(&opts, c.param).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) createPVC(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	out := &corev1.PersistentVolumeClaim{}
	err := c.rc.Post().Namespace(pvc.Namespace).Resource("persistentvolumeclaims").Body(pvc).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) getPVC(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	out := &corev1.PersistentVolumeClaim{}
	err := c.rc.Get().Namespace(ns).Resource("persistentvolumeclaims").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *coreClient) listPVCs(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
	out := &corev1.PersistentVolumeClaimList{}
	err := c.rc.Get().Namespace(ns).Resource("persistentvolumeclaims").VersionedParams(&opts, c.param).Do(ctx).Into(out)
	return out, err
}

// deleteNamed deletes one core/v1 object of a resource at once.
func (c *coreClient) deleteNamed(ctx context.Context, ns, resource, name string) error {
	var zero int64
	opts := metav1.DeleteOptions{GracePeriodSeconds: &zero}
	return c.rc.Delete().Namespace(ns).Resource(resource).Name(name).Body(&opts).Do(ctx).Error()
}

// patchPodLabels merges labels into a Pod's.
func (c *coreClient) patchPodLabels(ctx context.Context, ns, name string, lbl map[string]string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": lbl}})
	if err != nil {
		return err
	}
	return c.rc.Patch(types.MergePatchType).Namespace(ns).Resource("pods").Name(name).Body(body).Do(ctx).Error()
}

// npPath is the address of the NetworkPolicies of a namespace.
func npPath(ns string, name ...string) string {
	return path.Join(append([]string{"/apis/networking.k8s.io/v1/namespaces", ns, "networkpolicies"}, name...)...)
}

func (c *coreClient) createNetworkPolicy(ctx context.Context, np *networkingv1.NetworkPolicy) error {
	body, err := json.Marshal(np)
	if err != nil {
		return err
	}
	return c.rc.Post().AbsPath(npPath(np.Namespace)).SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
}

func (c *coreClient) getNetworkPolicy(ctx context.Context, ns, name string) (*networkingv1.NetworkPolicy, error) {
	raw, err := c.rc.Get().AbsPath(npPath(ns, name)).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := &networkingv1.NetworkPolicy{}
	return out, json.Unmarshal(raw, out)
}

func (c *coreClient) deleteNetworkPolicies(ctx context.Context, ns, selector string) error {
	return c.rc.Delete().AbsPath(npPath(ns)).Param("labelSelector", selector).Do(ctx).Error()
}
