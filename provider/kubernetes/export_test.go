package kubernetes

import (
	"context"
	"encoding/json"
)

// PodJSON returns the stored Pod object of a sandbox, for tests that look
// behind corral's back.
func PodJSON(ctx context.Context, p *Provider, name string) ([]byte, error) {
	pod, err := p.core.getPod(ctx, p.ns, name)
	if err != nil {
		return nil, err
	}
	return json.Marshal(pod)
}
