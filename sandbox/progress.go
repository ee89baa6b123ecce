package sandbox

import "context"

// ProgressStep is one step of slow preparation that a provider reports
// while it works: a layer of an image pull, a VM booting. Steps are for
// people watching; nothing may depend on them.
type ProgressStep struct {
	// Phase names the kind of work: "pull" for an image pull.
	Phase string `json:"phase"`
	// Subject is what the work is on, e.g. the image "node:22".
	Subject string `json:"subject"`
	// Where is the place it comes from, e.g. the registry "docker.io".
	Where string `json:"where,omitempty"`
	// Part is the piece the step is about (a layer's short id); empty for
	// the whole subject.
	Part string `json:"part,omitempty"`
	// Status is the backend's own status text ("Downloading").
	Status string `json:"status"`
	// Current and Total are the bytes done and expected, when counted.
	Current int64 `json:"current,omitempty"`
	Total   int64 `json:"total,omitempty"`
}

type progressKey struct{}

// WithProgress returns a context whose provider calls report their
// preparation steps to fn. fn runs on the goroutine of the call that
// reports (synchronously, in order) and must not block for long.
func WithProgress(ctx context.Context, fn func(ProgressStep)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ReportProgress hands step to the function WithProgress put in ctx, if
// any. Providers call it as they work.
func ReportProgress(ctx context.Context, step ProgressStep) {
	if fn, ok := ctx.Value(progressKey{}).(func(ProgressStep)); ok && fn != nil {
		fn(step)
	}
}
