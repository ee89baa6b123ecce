package kubernetes

import (
	"context"
	"net/url"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
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
