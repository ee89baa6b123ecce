package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/store"
)

// Checkpoints lists a thread's checkpoints, oldest first, without their
// entries, and returns the head's id
// (GET /v1/threads/{thread}/checkpoints).
func (c *Client) Checkpoints(ctx context.Context, thread string) ([]store.Checkpoint, string, error) {
	var items []struct {
		store.Checkpoint
		Head bool `json:"head"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(thread)+"/checkpoints", nil, &items); err != nil {
		return nil, "", err
	}
	out, head := make([]store.Checkpoint, len(items)), ""
	for i, it := range items {
		out[i] = it.Checkpoint
		if it.Head {
			head = it.ID
		}
	}
	return out, head, nil
}

// SaveCheckpoint captures the thread's live sandbox as its new head
// (POST /v1/threads/{thread}/checkpoints); the checkpoint comes back
// without its entries.
func (c *Client) SaveCheckpoint(ctx context.Context, thread, label string) (store.Checkpoint, error) {
	var out struct {
		Checkpoint store.Checkpoint `json:"checkpoint"`
	}
	err := c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(thread)+"/checkpoints", api.SaveCheckpoint{Label: label}, &out)
	return out.Checkpoint, err
}

// Fork starts thread dst (minted when empty) from checkpoint id of thread
// src (its head when empty) and returns dst's fork-root checkpoint.
func (c *Client) Fork(ctx context.Context, src, id, dst string) (store.Checkpoint, error) {
	var out store.Checkpoint
	err := c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(src)+"/fork", api.ForkThread{Checkpoint: id, Thread: dst}, &out)
	return out, err
}

// RestoreCheckpoint makes the thread's workspace equal to checkpoint id
// (its head when empty) and returns what it did: removed, dirs, files,
// symlinks and chmods.
func (c *Client) RestoreCheckpoint(ctx context.Context, thread, id string) (map[string]int, error) {
	var out map[string]int
	err := c.do(ctx, http.MethodPost, "/v1/threads/"+url.PathEscape(thread)+"/restore", api.RestoreCheckpoint{Checkpoint: id}, &out)
	return out, err
}
