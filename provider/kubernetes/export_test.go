package kubernetes

import (
	"context"
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodJSON returns the stored Pod object of a sandbox, for tests that look
// behind corral's back.
func PodJSON(ctx context.Context, p *Provider, name string) ([]byte, error) {
	pod, err := p.cs.CoreV1().Pods(p.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return json.Marshal(pod)
}
