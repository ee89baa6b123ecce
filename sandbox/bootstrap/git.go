package bootstrap

import (
	"context"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// credentialHelper is a one-shot git credential helper that answers from
// the environment, so a token reaches git without ever being in argv. It
// holds no values itself.
const credentialHelper = `!f() { test "$1" = get || exit 0; echo "username=${CORRAL_GIT_USER:-x-access-token}"; echo "password=${CORRAL_GIT_TOKEN}"; }; f`

// Clone describes one git clone.
type Clone struct {
	URL      string // repository URL (after sandbox.GitURL)
	Ref      string // branch or tag; empty for the default
	Depth    string // "" (1), "full" or a positive number
	Username string // for authenticated clones
	Token    string // the token value (from a secret); reaches git via env only
	Dir      string // target directory
}

// argv returns git's argv for the clone, and the environment that carries
// the credentials. Every value comes after "--" or as an option's value,
// and values starting with '-' are rejected.
func (c Clone) argv() ([]string, map[string]string, error) {
	for field, v := range map[string]string{"url": c.URL, "ref": c.Ref, "dir": c.Dir} {
		if err := sandbox.ValidateGitValue(field, v); err != nil {
			return nil, nil, err
		}
	}
	depth, err := sandbox.ParseDepth(c.Depth)
	if err != nil {
		return nil, nil, err
	}
	args := []string{"git", "-c", "credential.helper=", "-c", "credential.helper=" + credentialHelper, "clone", "--quiet"}
	if depth > 0 {
		args = append(args, "--depth", strconv.Itoa(depth), "--single-branch")
	}
	if c.Ref != "" {
		args = append(args, "--branch", c.Ref)
	}
	args = append(args, "--", c.URL, c.Dir)
	env := map[string]string{"GIT_TERMINAL_PROMPT": "0"}
	if c.Token != "" {
		env["CORRAL_GIT_TOKEN"] = c.Token
		if c.Username != "" {
			env["CORRAL_GIT_USER"] = c.Username
		}
	}
	return args, env, nil
}

// CloneInSandbox runs the clone with the sandbox's own git. c.Dir is a
// workspace path ("/workspace" or below); its parent is created first.
func CloneInSandbox(ctx context.Context, h sandbox.Handle, c Clone, secrets sandbox.Secrets) error {
	rel, err := sandbox.CleanPath(c.Dir)
	if err != nil {
		return err
	}
	if parent := path.Dir(rel); parent != "." && rel != "." {
		if err := h.FS().MkdirAll(ctx, parent); err != nil {
			return err
		}
	}
	c.Dir, _ = sandbox.MapPath(h.WorkspaceRoot(), rel)
	args, env, err := c.argv()
	if err != nil {
		return err
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: args, Env: env})
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, "git.clone", c.URL, err)
	}
	if res.ExitCode == 127 || res.ExitCode == 126 {
		return sandbox.Errorf(sandbox.FailedPrecondition, "git.clone", c.URL,
			"git is not installed in the sandbox; install it in the image, or clone on the host (source cloneOn: host)")
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.FailedPrecondition, "git.clone", c.URL, "git clone exited %d: %s",
			res.ExitCode, tail(secrets.Redact(string(res.Stderr)+string(res.Stdout)), 1500))
	}
	return nil
}

// CloneOnHost runs the clone with the host's git into a new temporary
// directory and returns it; the caller removes it.
func CloneOnHost(ctx context.Context, c Clone, secrets sandbox.Secrets) (string, error) {
	tmp, err := os.MkdirTemp("", "corral-clone-")
	if err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "git.clone", c.URL, err)
	}
	c.Dir = path.Join(tmp, "src")
	args, env, err := c.argv()
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		if ctx.Err() != nil {
			return "", sandbox.Wrap(sandbox.Canceled, "git.clone", c.URL, ctx.Err())
		}
		if _, lerr := exec.LookPath("git"); lerr != nil {
			return "", sandbox.Errorf(sandbox.FailedPrecondition, "git.clone", c.URL, "git is not installed on this host")
		}
		return "", sandbox.Errorf(sandbox.FailedPrecondition, "git.clone", c.URL, "git clone failed (%v): %s", err, tail(secrets.Redact(string(out)), 1500))
	}
	return c.Dir, nil
}

// SourceClone returns the clone for a workspace's git source.
func SourceClone(ws *sandbox.Workspace) (Clone, bool) {
	if ws == nil || ws.Source == nil || ws.Source.Git == "" {
		return Clone{}, false
	}
	s := ws.Source
	c := Clone{URL: sandbox.GitURL(s.Git), Ref: s.Ref, Depth: s.Depth, Username: s.Username}
	if s.TokenSecret != "" {
		c.Token, _ = ws.Secrets.Value(s.TokenSecret)
	}
	return c, true
}

// CloneOnHostFor reports whether a source's clone runs on the host.
func CloneOnHostFor(s *sandbox.Source) bool {
	switch s.CloneOn {
	case "host":
		return true
	case "sandbox":
		return false
	}
	return sandbox.IsHostGitURL(sandbox.GitURL(s.Git))
}

func tail(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
