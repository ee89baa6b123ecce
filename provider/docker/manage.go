package docker

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// Sandbox describes one of corral's containers, as List returns it.
type Sandbox struct {
	ID          string            `json:"id"`          // the sandbox id (container name)
	ContainerID string            `json:"containerId"` // the Docker container id
	Key         string            `json:"key,omitempty"`
	Image       string            `json:"image"`
	State       string            `json:"state"`  // created, running, paused, exited, dead, ...
	Status      string            `json:"status"` // Docker's human-readable status
	CreatedAt   time.Time         `json:"createdAt"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// SnapshotImage describes one of corral's snapshot or fork images.
type SnapshotImage struct {
	sandbox.Snapshot
	ImageID string `json:"imageId"`
	Kind    string `json:"kind"` // "snapshot", or "fork" for a fork's image
	Size    int64  `json:"size"`
	// Labels are the image's labels, corral's and those carried over from
	// the container.
	Labels map[string]string `json:"labels,omitempty"`
}

// List returns corral's containers on the engine, newest first, whatever
// their state. Containers made outside corral are never listed.
func (p *Provider) List(ctx context.Context) ([]Sandbox, error) {
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelManaged+"=true")})
	if err != nil {
		return nil, p.apiError("docker.list", "", err)
	}
	out := make([]Sandbox, 0, len(res.Items))
	for _, c := range res.Items {
		name := c.Labels[LabelSandboxID]
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Sandbox{
			ID: name, ContainerID: c.ID, Key: c.Labels[LabelKey], Image: c.Image,
			State: string(c.State), Status: c.Status,
			CreatedAt: createdAt(c.Labels, c.Created), Labels: c.Labels,
		})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// ListSnapshots returns corral's snapshot and fork images, newest first.
// Each tag is one entry; its ID is what RestoreSnapshot takes.
func (p *Provider) ListSnapshots(ctx context.Context) ([]SnapshotImage, error) {
	res, err := p.cli.ImageList(ctx, client.ImageListOptions{
		Filters: client.Filters{}.Add("label", LabelManaged+"=true", LabelSnapshot)})
	if err != nil {
		return nil, p.apiError("docker.snapshots", "", err)
	}
	var out []SnapshotImage
	for _, im := range res.Items {
		refs := im.RepoTags
		if len(refs) == 0 {
			refs = []string{im.ID} // untagged: only the id reaches it
		}
		for _, ref := range refs {
			out = append(out, SnapshotImage{
				Snapshot: sandbox.Snapshot{
					ID:        ref,
					Label:     im.Labels[LabelSnapshotLabel],
					SandboxID: im.Labels[LabelSnapshotOf],
					CreatedAt: createdAt(im.Labels, im.Created),
				},
				ImageID: im.ID,
				Kind:    im.Labels[LabelSnapshot],
				Size:    im.Size,
				Labels:  im.Labels,
			})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// createdAt prefers corral's label and falls back to Docker's timestamp.
func createdAt(labels map[string]string, unix int64) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, labels[LabelCreatedAt]); err == nil {
		return t
	}
	return time.Unix(unix, 0).UTC()
}

// PruneOptions select what Prune removes.
type PruneOptions struct {
	// OlderThan keeps everything created less than this long ago. Zero
	// selects everything.
	OlderThan time.Duration
	// Sandboxes and Snapshots choose the kinds to remove: containers, and
	// snapshot and fork images. When neither is set, both are.
	Sandboxes bool
	Snapshots bool
	// KeepRunning leaves running containers alone.
	KeepRunning bool
	// Labels, when set, select only containers and images carrying all of
	// these labels with these values.
	Labels map[string]string
	// DryRun reports what would be removed without removing it.
	DryRun bool
}

// PruneReport lists what Prune removed (or would remove, for a dry run).
type PruneReport struct {
	Sandboxes []string `json:"sandboxes"` // sandbox ids
	Snapshots []string `json:"snapshots"` // image references
	// InUse lists snapshot images kept because a container still uses
	// them.
	InUse []string `json:"inUse,omitempty"`
}

// Prune removes corral's containers and snapshot images selected by opts:
// containers first (force, with their anonymous volumes), then images no
// container uses any more. Nothing without corral's labels is touched.
func (p *Provider) Prune(ctx context.Context, opts PruneOptions) (PruneReport, error) {
	var rep PruneReport
	if !opts.Sandboxes && !opts.Snapshots {
		opts.Sandboxes, opts.Snapshots = true, true
	}
	cutoff := time.Now().Add(-opts.OlderThan)
	match := func(labels map[string]string, created time.Time) bool {
		for k, v := range opts.Labels {
			if labels[k] != v {
				return false
			}
		}
		return opts.OlderThan <= 0 || created.Before(cutoff)
	}
	var errs []error
	if opts.Sandboxes {
		boxes, err := p.List(ctx)
		if err != nil {
			return rep, err
		}
		for _, b := range boxes {
			if !match(b.Labels, b.CreatedAt) || opts.KeepRunning && b.State == "running" {
				continue
			}
			if !opts.DryRun {
				forkImage := ""
				if b.Labels[LabelForkOf] != "" {
					forkImage = b.Labels[LabelFrom]
				}
				if err := p.remove(ctx, "docker.prune", b.ID, b.ContainerID, forkImage); err != nil {
					errs = append(errs, err)
					continue
				}
			}
			rep.Sandboxes = append(rep.Sandboxes, b.ID)
		}
	}
	if opts.Snapshots {
		snaps, err := p.ListSnapshots(ctx)
		if err != nil {
			return rep, errors.Join(append(errs, err)...)
		}
		for _, s := range snaps {
			if !match(s.Labels, s.CreatedAt) {
				continue
			}
			if !opts.DryRun {
				_, err := p.cli.ImageRemove(ctx, s.ID, client.ImageRemoveOptions{PruneChildren: true})
				switch {
				case cerrdefs.IsNotFound(err):
				case cerrdefs.IsConflict(err):
					rep.InUse = append(rep.InUse, s.ID)
					continue
				case err != nil:
					errs = append(errs, p.apiError("docker.prune", s.ID, err))
					continue
				}
			}
			rep.Snapshots = append(rep.Snapshots, s.ID)
		}
	}
	return rep, errors.Join(errs...)
}
