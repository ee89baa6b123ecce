package sbx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// cliResult is one finished sbx invocation.
type cliResult struct {
	stdout, stderr []byte
	code           int
}

// command builds an sbx invocation (argv only; never a shell).
func (p *Provider) command(ctx context.Context, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, p.bin, args...)
	c.Env = append(os.Environ(), p.opts.Env...)
	c.WaitDelay = waitDelay
	return c
}

// host runs a host verb (ls, create, rm, policy, ports) to completion and
// turns a failure into a coded error: the login check runs on these only,
// never on a command's own output.
func (p *Provider) host(ctx context.Context, op, id string, args ...string) (*cliResult, error) {
	c := p.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	res := &cliResult{stdout: stdout.Bytes(), stderr: stderr.Bytes()}
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, p.startError(ctx, op, id, err)
		}
		res.code = ee.ExitCode()
		return res, classify(op, id, args, res)
	}
	return res, nil
}

// startError is the error for an sbx that could not be run at all.
func (p *Provider) startError(ctx context.Context, op, id string, err error) error {
	if ctx.Err() != nil {
		return sandbox.Wrap(sandbox.Canceled, op, id, ctx.Err())
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, id,
			"the Docker Sandboxes CLI %q is not on PATH: install sbx (docs.docker.com/ai/sandboxes), run `sbx login`, or set provider.sbx.binary", p.bin)
	}
	return sandbox.Wrap(sandbox.Unavailable, op, id, err)
}

// classify maps a failed host verb to a code from its stderr.
func classify(op, id string, args []string, res *cliResult) error {
	msg := strings.TrimSpace(string(res.stderr))
	if msg == "" {
		msg = strings.TrimSpace(string(res.stdout))
	}
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	low := strings.ToLower(msg)
	verb := "sbx " + strings.Join(args[:min(2, len(args))], " ")
	switch {
	case loginError(low):
		return sandbox.Errorf(sandbox.PermissionDenied, op, id,
			"sbx is not logged in (run `sbx login`, or pipe a token to `sbx login --password-stdin` in CI): %s", msg)
	case strings.Contains(low, "already exists"):
		return sandbox.Errorf(sandbox.AlreadyExists, op, id, "%s: %s", verb, msg)
	case strings.Contains(low, "not found") || strings.Contains(low, "no such"):
		return sandbox.Errorf(sandbox.NotFound, op, id, "%s: %s", verb, msg)
	case strings.Contains(low, "unknown flag") || strings.Contains(low, "unknown command") ||
		strings.Contains(low, "unknown shorthand") || strings.Contains(low, "invalid"):
		return sandbox.Errorf(sandbox.InvalidArgument, op, id, "%s (this sbx may be older or newer than corral expects): %s", verb, msg)
	case strings.Contains(low, "cannot connect") || strings.Contains(low, "connection refused") ||
		strings.Contains(low, "daemon is not running") || strings.Contains(low, "hypervisor"):
		return sandbox.Errorf(sandbox.Unavailable, op, id, "%s: %s", verb, msg)
	}
	return sandbox.Errorf(sandbox.Unknown, op, id, "%s exited %d: %s", verb, res.code, msg)
}

// loginError reports the CLI's words for a missing login.
func loginError(low string) bool {
	for _, w := range []string{"not logged in", "not authenticated", "unauthoriz", "login required", "sbx login"} {
		if strings.Contains(low, w) {
			return true
		}
	}
	return false
}

// decodeJSON decodes the JSON document in out, which may follow a banner
// line (docker/sbx-releases#201): it tries from each line that starts
// with '{' or '['.
func decodeJSON(out []byte, v any) error {
	if err := json.Unmarshal(bytes.TrimSpace(out), v); err == nil {
		return nil
	}
	var first error
	for i := 0; i < len(out); i++ {
		if (i == 0 || out[i-1] == '\n') && (out[i] == '{' || out[i] == '[') {
			dec := json.NewDecoder(bytes.NewReader(out[i:]))
			err := dec.Decode(v)
			if err == nil {
				return nil
			}
			if first == nil {
				first = err
			}
		}
	}
	if first == nil {
		first = io.ErrUnexpectedEOF
	}
	return first
}

// lsEntry is one sandbox in `sbx ls --json`.
type lsEntry struct {
	Name       string   `json:"name"`
	Agent      string   `json:"agent"`
	Status     string   `json:"status"`
	Ports      []string `json:"ports"`
	Workspaces []string `json:"workspaces"`
}

// list runs `sbx ls --json`: {"sandboxes": [...]} (a bare array is taken
// too).
func (p *Provider) list(ctx context.Context, op string) ([]lsEntry, error) {
	res, err := p.host(ctx, op, "", "ls", "--json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Sandboxes []lsEntry `json:"sandboxes"`
	}
	if err := decodeJSON(res.stdout, &doc); err != nil {
		var arr []lsEntry
		if aerr := decodeJSON(res.stdout, &arr); aerr != nil {
			return nil, sandbox.Errorf(sandbox.Internal, op, "", "sbx ls --json printed what is not its JSON: %v", err)
		}
		return arr, nil
	}
	return doc.Sandboxes, nil
}

// lookup finds the sandbox name in `sbx ls --json`.
func (p *Provider) lookup(ctx context.Context, op, name string) (lsEntry, bool, error) {
	list, err := p.list(ctx, op)
	if err != nil {
		return lsEntry{}, false, err
	}
	for _, e := range list {
		if e.Name == name {
			return e, true, nil
		}
	}
	return lsEntry{}, false, nil
}
