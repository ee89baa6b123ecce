package harness

import (
	"context"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// This file holds what the harnesses share to project a workspace into
// their agent's own configuration on every run: skills (found under
// Request.SkillRoots) and MCP servers (Request.MCPServers) whose secret
// values travel in the agent's environment, referenced from configuration.

// Skill is one skill found in the workspace: a directory holding a
// SKILL.md.
type Skill struct {
	// Name is the directory's base name, made unique among the run's
	// skills with a numeric suffix ("review", "review-2").
	Name string
	// Dir is the skill directory's absolute path inside the sandbox.
	Dir string
}

// FindSkills looks for SKILL.md files under the request's skill roots
// (to depth 6, leaving out dot directories and node_modules) with one
// command, and returns the skill directories in a stable order. Roots that
// do not exist are skipped; no roots is no skills and no command.
func FindSkills(ctx context.Context, h sandbox.Handle, req Request) ([]Skill, error) {
	if len(req.SkillRoots) == 0 {
		return nil, nil
	}
	root := req.WorkspaceRoot
	if root == "" {
		root = h.WorkspaceRoot()
	}
	// $1 is the workspace root, the rest are roots relative to it.
	const script = `cd "$1" || exit 1; shift
for r in "$@"; do
  [ -d "$r" ] || continue
  find "$r" -maxdepth 7 -type f -name SKILL.md 2>/dev/null
done
exit 0`
	args := append([]string{"sh", "-c", script, "corral-skills", root}, req.SkillRoots...)
	res, err := h.Exec(ctx, sandbox.Command{Args: args})
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "harness.skills", req.RunID, err)
	}
	if res.ExitCode != 0 {
		return nil, sandbox.Errorf(sandbox.Internal, "harness.skills", req.RunID, "listing skills exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	var dirs []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		rel, err := sandbox.CleanPath(line)
		if err != nil {
			continue
		}
		dir := path.Dir(rel)
		if hiddenOrVendored(dir, req.SkillRoots) || seen[dir] {
			continue
		}
		seen[dir] = true
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	skills := make([]Skill, 0, len(dirs))
	names := map[string]bool{}
	for _, d := range dirs {
		base := path.Base(d)
		if d == "." || d == "" {
			base = "workspace"
		}
		name := base
		for n := 2; names[name]; n++ {
			name = base + "-" + strconv.Itoa(n)
		}
		names[name] = true
		skills = append(skills, Skill{Name: name, Dir: path.Join(root, d)})
	}
	return skills, nil
}

// hiddenOrVendored reports whether a relative directory passes through a
// dot directory or node_modules below its skill root. The roots
// themselves (".corral/skills/...") may be hidden.
func hiddenOrVendored(dir string, roots []string) bool {
	below := dir
	for _, r := range roots {
		r, err := sandbox.CleanPath(r)
		if err != nil {
			continue
		}
		if dir == r {
			return false
		}
		if r == "." {
			continue // the whole workspace: below is dir itself
		}
		if rest, ok := strings.CutPrefix(dir, r+"/"); ok && len(rest) < len(below) {
			below = rest
		}
	}
	for _, p := range strings.Split(below, "/") {
		if p == "node_modules" || strings.HasPrefix(p, ".") {
			return true
		}
	}
	return false
}

// LinkSkills makes dir (an absolute path inside the sandbox, outside the
// workspace: a run's private directory) hold one symbolic link per skill,
// named after it, with one command.
func LinkSkills(ctx context.Context, h sandbox.Handle, dir string, skills []Skill) error {
	if len(skills) == 0 {
		return nil
	}
	// $1 is the directory; then pairs of name and target.
	const script = `set -e
d=$1; shift
mkdir -p "$d"
while [ $# -ge 2 ]; do
  ln -sfn "$2" "$d/$1"
  shift 2
done`
	args := []string{"sh", "-c", script, "corral-link-skills", dir}
	for _, s := range skills {
		args = append(args, s.Name, s.Dir)
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: args})
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, "harness.skills", dir, err)
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "harness.skills", dir, "linking skills exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// MCPValuePrefix names the environment variables that carry MCP header
// and env values to an agent (CORRAL_MCP_VALUE_0, …). The name avoids
// words such as SECRET, TOKEN and KEY on purpose: agent CLIs scrub
// variables so named from the environments of the processes they start
// (Claude Code 2.1.332 with CLAUDE_CODE_SUBPROCESS_ENV_SCRUB=1 emptied a
// CORRAL_MCP_SECRET_0 but passed CORRAL_MCP_VALUE_0).
const MCPValuePrefix = "CORRAL_MCP_VALUE_"

// SecretEnv moves the secret-bearing values of a run's configuration into
// the agent's environment, so that configuration files and argv only
// reference them. The zero value is not usable: see NewSecretEnv.
type SecretEnv struct {
	secrets sandbox.Secrets
	// Env holds the variables to add to the agent's environment.
	Env map[string]string
}

// NewSecretEnv returns a SecretEnv whose variables are named
// MCPValuePrefix0, MCPValuePrefix1, ….
func NewSecretEnv(secrets sandbox.Secrets) *SecretEnv {
	return &SecretEnv{secrets: secrets, Env: map[string]string{}}
}

// Ref returns v unchanged when it names no secret. Otherwise it expands v
// into a new environment variable and returns ref(variable name), the
// agent's own syntax for reading it ("${NAME}", "{env:NAME}").
func (s *SecretEnv) Ref(v string, ref func(name string) string) (string, error) {
	if !sandbox.HasSecretRef(v) {
		return v, nil
	}
	name, err := s.Var(v)
	if err != nil {
		return "", err
	}
	return ref(name), nil
}

// Var expands v (which may name secrets) into a new environment variable
// and returns its name.
func (s *SecretEnv) Var(v string) (string, error) {
	x, err := sandbox.ExpandSecretRefs(v, s.secrets)
	if err != nil {
		return "", err
	}
	name := MCPValuePrefix + strconv.Itoa(len(s.Env))
	s.Env[name] = x
	return name, nil
}

// MCPConfig turns the run's MCP servers into the entries of an mcpServers
// object in Claude Code's .mcp.json shape (which other CLIs read too):
// stdio as {type, command, args, env}, http and sse as {type, url,
// headers}. A header, environment, url, command or argument value that
// names a secret, or holds "${" at all, moves into an environment variable
// of se and the entry references it as ${NAME}: secret values stay out of
// the file and argv, and other values reach the server literally, not
// expanded by the CLI. Validate the servers first.
func MCPConfig(servers []sandbox.MCPServer, se *SecretEnv) (map[string]any, error) {
	val := func(v string) (string, error) {
		if !strings.Contains(v, "${") {
			return v, nil
		}
		name, err := se.Var(v)
		if err != nil {
			return "", err
		}
		return "${" + name + "}", nil
	}
	vals := func(m map[string]string) (map[string]string, error) {
		out := make(map[string]string, len(m))
		for _, k := range sandbox.SortedKeys(m) {
			v, err := val(m[k])
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	out := make(map[string]any, len(servers))
	for _, s := range servers {
		switch t := s.Transport(); t {
		case sandbox.MCPStdio:
			cmd, err := val(s.Command)
			if err != nil {
				return nil, err
			}
			args := make([]string, len(s.Args))
			for i, a := range s.Args {
				if args[i], err = val(a); err != nil {
					return nil, err
				}
			}
			env, err := vals(s.Env)
			if err != nil {
				return nil, err
			}
			out[s.Name] = map[string]any{"type": t, "command": cmd, "args": args, "env": env}
		default: // http, sse
			url, err := val(s.URL)
			if err != nil {
				return nil, err
			}
			headers, err := vals(s.Headers)
			if err != nil {
				return nil, err
			}
			out[s.Name] = map[string]any{"type": t, "url": url, "headers": headers}
		}
	}
	return out, nil
}
