package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// PullPolicy says when Create pulls Options.Image from its registry, like
// Kubernetes' imagePullPolicy.
type PullPolicy string

const (
	// PullMissing pulls the image only when the engine does not have it
	// (the default). An image present on the engine is never pulled.
	PullMissing PullPolicy = "missing"
	// PullAlways pulls the image before every Create, so a moved tag is
	// followed; the pull is quick when nothing changed.
	PullAlways PullPolicy = "always"
	// PullNever never pulls: the image must be built or loaded first, and a
	// missing one is an error with code NotFound.
	PullNever PullPolicy = "never"
)

// ParsePullPolicy parses "missing", "always" or "never" (empty is
// PullMissing).
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch p := PullPolicy(strings.TrimSpace(s)); p {
	case "":
		return PullMissing, nil
	case PullMissing, PullAlways, PullNever:
		return p, nil
	}
	return "", fmt.Errorf("unknown pull policy %q (want missing, always or never)", s)
}

// PullProgress is one step of an image pull, reported to Options.OnPull:
// once per change of a layer's state ("Waiting", "Downloading",
// "Extracting", "Pull complete", "Already exists"…) and once per message
// about the whole image ("Pulling from …", "Digest: …", "Status: …"),
// never per byte counted.
type PullProgress struct {
	// Image is the reference being pulled, e.g. "node:22".
	Image string
	// Registry is the registry host it is pulled from, e.g. "docker.io".
	Registry string
	// Layer is the layer's short id; empty for a message about the image.
	Layer string
	// Status is the engine's status text.
	Status string
	// Current and Total are the bytes done and expected in this state,
	// when the engine counts them (0 otherwise).
	Current, Total int64
}

// String renders the step as one terminal line.
func (p PullProgress) String() string {
	s := "pull " + p.Image
	if p.Layer != "" {
		s += " " + p.Layer
	}
	s += ": " + p.Status
	if p.Total > 0 {
		s += fmt.Sprintf(" (%d bytes)", p.Total)
	}
	return s
}

// registryOf returns the registry host of an image reference, as the
// docker CLI reads it: the part before the first slash when it looks like
// a host (has a dot or a colon, or is localhost), else docker.io.
func registryOf(image string) string {
	i := strings.IndexByte(image, '/')
	if i < 0 {
		return "docker.io"
	}
	host := image[:i]
	if strings.ContainsAny(host, ".:") || host == "localhost" {
		if host == "index.docker.io" || host == "registry-1.docker.io" {
			return "docker.io"
		}
		return host
	}
	return "docker.io"
}

// ensureImage applies the pull policy before a container is created from
// image. With PullMissing it only pulls when the image is absent; the
// caller learns that from the create's own error (pullIfMissing), so a
// present image costs no extra round trip.
func (p *Provider) ensureImage(ctx context.Context, op, image string) error {
	if p.opts.Pull != PullAlways {
		return nil
	}
	return p.pull(ctx, op, image)
}

// pull pulls image with the user's registry credentials, reporting each
// step to Options.OnPull and to the context's progress function
// (sandbox.WithProgress: a run's events).
func (p *Provider) pull(ctx context.Context, op, image string) error {
	reg := registryOf(image)
	auth, note, err := registryAuth(p.opts.DockerConfig, reg)
	if err != nil {
		return &sandbox.Error{Code: sandbox.InvalidArgument, Op: op, ID: image,
			Msg: fmt.Sprintf("reading the Docker credentials for registry %s", reg), Err: err}
	}
	p.log.Debug("docker: pulling an image", "image", image, "registry", reg, "credentials", auth != "")
	resp, err := p.cli.ImagePull(ctx, image, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return p.pullError(op, image, reg, note, err)
	}
	defer resp.Close()
	last := map[string]string{}
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return p.pullError(op, image, reg, note, err)
		}
		if m.Error != nil {
			return p.pullError(op, image, reg, note, errors.New(m.Error.Message))
		}
		if m.Status == "" || last[m.ID] == m.Status {
			continue
		}
		last[m.ID] = m.Status
		pp := PullProgress{Image: image, Registry: reg, Layer: m.ID, Status: m.Status}
		if m.Progress != nil {
			pp.Current, pp.Total = m.Progress.Current, m.Progress.Total
		}
		if p.opts.OnPull != nil {
			p.opts.OnPull(pp)
		}
		sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "pull", Subject: image, Where: reg, Part: m.ID,
			Status: m.Status, Current: pp.Current, Total: pp.Total})
	}
	return nil
}

// pullError gives a failed pull its code and a message naming the image
// and the registry. The daemon's text never holds the credentials (they
// travel in a header the daemon does not echo).
func (p *Provider) pullError(op, image, reg, note string, err error) error {
	if client.IsErrConnectionFailed(err) || isDialError(err) {
		return p.apiError(op, image, err)
	}
	if c := sandbox.CodeOf(err); c == sandbox.Canceled || c == sandbox.DeadlineExceeded {
		return sandbox.Wrap(c, op, image, err)
	}
	msg := strings.ToLower(err.Error())
	var code sandbox.Code
	var what string
	switch {
	case cerrdefs.IsUnauthorized(err) || cerrdefs.IsPermissionDenied(err) ||
		strings.Contains(msg, "unauthorized") || strings.Contains(msg, "authentication required") ||
		strings.Contains(msg, "no basic auth credentials") || strings.Contains(msg, "denied"):
		code, what = sandbox.PermissionDenied, "the registry refused the credentials (or asked for some): log in with docker login, or fix the auths entry in the Docker config"
		if note != "" {
			what += "; " + note
		}
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") ||
		strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "dial tcp") ||
		strings.Contains(msg, "network is unreachable") || strings.Contains(msg, "tls handshake timeout") ||
		cerrdefs.IsUnavailable(err):
		code, what = sandbox.Unavailable, "the registry is unreachable"
	case cerrdefs.IsNotFound(err) || strings.Contains(msg, "not found") || strings.Contains(msg, "manifest unknown") ||
		strings.Contains(msg, "does not exist"):
		code, what = sandbox.NotFound, "the registry has no such image"
	default:
		code, what = sandbox.Internal, "the pull failed"
	}
	return &sandbox.Error{Code: code, Op: op, ID: image,
		Msg: fmt.Sprintf("pulling image %q from registry %s: %s", image, reg, what), Err: err}
}

// missingImage is the error for an image the engine does not have: with
// the pull policy never it says so; otherwise (CheckImage) it says Create
// would pull it.
func (p *Provider) missingImage(op, image string, err error) error {
	msg := fmt.Sprintf("image %q is not present on the engine at %s and the pull policy is never: build it (docker build), load it (docker load) or pull it first, or set the pull policy to missing", image, p.cli.DaemonHost())
	if p.opts.Pull != PullNever {
		msg = fmt.Sprintf("image %q is not present on the engine at %s; Create pulls it from registry %s (pull policy %s)", image, p.cli.DaemonHost(), registryOf(image), p.opts.Pull)
	}
	return &sandbox.Error{Code: sandbox.NotFound, Op: op, ID: image, Msg: msg, Err: imageAbsentError{err}}
}

// imageAbsentError marks the engine's "no such image" inside a
// missingImage error, so Create knows to pull.
type imageAbsentError struct{ error }

// Unwrap returns the engine's error.
func (e imageAbsentError) Unwrap() error { return e.error }

// imageMissing reports whether err is missingImage's.
func imageMissing(err error) bool {
	var a imageAbsentError
	return errors.As(err, &a)
}

// PullPolicy returns the pull policy in effect (Options.Pull, defaulted).
func (p *Provider) PullPolicy() PullPolicy { return p.opts.Pull }
