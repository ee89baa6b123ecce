package sprites

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// Checkpointer is what a Sprites handle offers beyond the contract:
// checkpoints that live in the Sprite and are restored in place.
//
//	if c, ok := h.(sprites.Checkpointer); ok { cp, err := c.Checkpoint(ctx, "before-upgrade"); … c.RestoreCheckpoint(ctx, cp.ID) }
type Checkpointer interface {
	// Checkpoint takes a checkpoint of the Sprite's file system and
	// returns it (its id is Sprites' version, "vN").
	Checkpoint(ctx context.Context, comment string) (Checkpoint, error)
	// Checkpoints lists the Sprite's checkpoints, newest first.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)
	// RestoreCheckpoint rolls the Sprite back to checkpoint id in place:
	// its processes end, its files are the checkpoint's. It returns once
	// files read back (a sentinel written and read twice in a row), since
	// the restored overlay lists before it reads.
	RestoreCheckpoint(ctx context.Context, id string) error
}

var _ Checkpointer = (*handle)(nil)

var versionRE = regexp.MustCompile(`\bv[0-9]+\b`)

func (h *handle) spritePath(rest string) string {
	return "/v1/sprites/" + url.PathEscape(h.sp.Name) + rest
}

// drain reads an NDJSON progress stream to its end; an error message
// fails it. It returns the last checkpoint version mentioned.
func (h *handle) drain(op string, resp *http.Response) (string, error) {
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	version := ""
	for sc.Scan() {
		var m StreamMessage
		if json.Unmarshal(sc.Bytes(), &m) != nil {
			continue
		}
		if m.Type == "error" {
			return "", sandbox.Errorf(sandbox.Internal, op, h.sp.Name, "sprites: %s%s", m.Error, m.Message)
		}
		if v := versionRE.FindString(m.Data + " " + m.Message); v != "" {
			version = v
		}
	}
	if err := sc.Err(); err != nil {
		return "", sandbox.Errorf(sandbox.Unavailable, op, h.sp.Name, "sprites: the progress stream dropped: %v", err)
	}
	return version, nil
}

// Checkpoint takes a checkpoint: POST …/checkpoint (its progress drained),
// then the list, to return the new checkpoint.
func (h *handle) Checkpoint(ctx context.Context, comment string) (Checkpoint, error) {
	op := Name + ".checkpoint"
	body := map[string]string{}
	if comment != "" {
		body["comment"] = comment
	}
	resp, err := h.p.c.Stream(ctx, cloudhttp.Request{Op: op, ID: h.sp.Name, Method: http.MethodPost, Path: h.spritePath("/checkpoint"), JSON: body})
	if err != nil {
		return Checkpoint{}, err
	}
	version, err := h.drain(op, resp)
	if err != nil {
		return Checkpoint{}, err
	}
	list, err := h.Checkpoints(ctx)
	if err != nil {
		return Checkpoint{}, err
	}
	best, bestN := Checkpoint{}, -1
	for _, c := range list {
		if c.ID == version {
			return c, nil
		}
		if n, err := strconv.Atoi(c.ID[min(1, len(c.ID)):]); err == nil && n > bestN {
			best, bestN = c, n
		}
	}
	if bestN < 0 {
		return Checkpoint{}, sandbox.Errorf(sandbox.Internal, op, h.sp.Name, "sprites lists no checkpoint after creating one")
	}
	return best, nil
}

// Checkpoints lists the Sprite's checkpoints.
func (h *handle) Checkpoints(ctx context.Context) ([]Checkpoint, error) {
	var list []Checkpoint
	if _, err := h.p.c.Do(ctx, cloudhttp.Request{Op: Name + ".checkpoints", ID: h.sp.Name, Method: http.MethodGet, Path: h.spritePath("/checkpoints")}, &list); err != nil {
		return nil, err
	}
	return list, nil
}

// RestoreCheckpoint restores id in place and waits until reads work.
func (h *handle) RestoreCheckpoint(ctx context.Context, id string) error {
	op := Name + ".restore"
	if id == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, op, h.sp.Name, "empty checkpoint id")
	}
	resp, err := h.p.c.Stream(ctx, cloudhttp.Request{Op: op, ID: h.sp.Name, Method: http.MethodPost, Path: h.spritePath("/checkpoints/" + url.PathEscape(id) + "/restore")})
	if err != nil {
		return err
	}
	if _, err := h.drain(op, resp); err != nil {
		return err
	}
	return h.waitReadable(ctx, op)
}

// waitReadable writes a sentinel through the file API and reads it back
// until two reads in a row return it, pausing with backoff between tries
// (cloudhttp's Sleep, which tests inject) up to RestoreTimeout.
func (h *handle) waitReadable(ctx context.Context, op string) error {
	sentinel := path.Join(h.root, ".corral-restore-"+randomHex(4))
	want := []byte(randomHex(8))
	deadline := time.Now().Add(h.p.opts.RestoreTimeout)
	pause := 50 * time.Millisecond
	ok := 0
	var last error
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = h.p.c.Do(dctx, cloudhttp.Request{Op: op, ID: h.sp.Name, Method: http.MethodDelete, Path: h.spritePath("/fs/delete"), Query: url.Values{"path": {sentinel}}}, nil)
	}()
	for tries := 0; ; tries++ {
		got, err := h.readBack(ctx, op, sentinel, want)
		if err == nil && bytes.Equal(got, want) {
			ok++
			if ok == 2 {
				h.p.log.Debug("sprites: reads work after the restore", "sprite", h.sp.Name, "tries", tries+1)
				return nil
			}
			continue
		}
		ok, last = 0, err
		if ctx.Err() != nil {
			return sandbox.Wrap(sandbox.Canceled, op, h.sp.Name, ctx.Err())
		}
		if time.Now().After(deadline) {
			return sandbox.Errorf(sandbox.DeadlineExceeded, op, h.sp.Name, "sprites: reads still fail %v after the restore: %v", h.p.opts.RestoreTimeout, last)
		}
		if err := h.sleep(ctx, pause); err != nil {
			return sandbox.Wrap(sandbox.Canceled, op, h.sp.Name, err)
		}
		pause = min(2*pause, 2*time.Second)
	}
}

func (h *handle) sleep(ctx context.Context, d time.Duration) error {
	if h.p.opts.Sleep != nil {
		return h.p.opts.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readBack writes data to p (fs/write) and reads it (fs/read), once each.
func (h *handle) readBack(ctx context.Context, op, p string, data []byte) ([]byte, error) {
	one := cloudhttp.Request{Op: op, ID: h.sp.Name, Method: http.MethodPut, Path: h.spritePath("/fs/write"),
		Query: url.Values{"path": {p}, "mkdirParents": {"true"}}, Body: data, ContentType: "application/octet-stream", Timeout: 8 * time.Second}
	if _, err := h.p.c.Do(ctx, one, nil); err != nil {
		return nil, err
	}
	resp, err := h.p.c.Do(ctx, cloudhttp.Request{Op: op, ID: h.sp.Name, Method: http.MethodGet, Path: h.spritePath("/fs/read"),
		Query: url.Values{"path": {p}}, Timeout: 8 * time.Second}, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}
