package sandbox

import (
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Workspace is what the agent finds in its sandbox: the source tree, the
// setup that prepares it, instructions, scripts, skills and secrets.
//
// Everything but Secrets is part of the workspace hash (and so of the
// sandbox key): change the setup and the next ensure builds a new sandbox.
type Workspace struct {
	// Source is where the files come from; nil means an empty workspace.
	Source *Source `json:"source,omitempty"`
	// Setup runs once, when the sandbox is created (not on resume or
	// restore).
	Setup []SetupStep `json:"setup,omitempty"`
	// Scripts are named commands, listed in AGENTS.md and usable as policy
	// aliases.
	Scripts map[string]string `json:"scripts,omitempty"`
	// Instructions become AGENTS.md at the workspace root (with CLAUDE.md and
	// GEMINI.md linked to it).
	Instructions string `json:"instructions,omitempty"`
	// Skills are files and skill packs written into the workspace. The
	// SKILL.md skills among them are also projected into each agent's own
	// skill directory on every run (see SkillRoots).
	Skills []Skill `json:"skills,omitempty"`
	// MCPServers are given to the agent of every run, written into its own
	// configuration for that run only. They are not part of the workspace
	// hash: changing them needs no new sandbox.
	MCPServers []MCPServer `json:"mcpServers,omitempty"`
	// Secrets are resolved values; see Secrets for where they may go.
	Secrets Secrets `json:"-"`
}

// Source is where a workspace's files come from: a git repository (Git) or
// a host directory (Dir); at most one.
type Source struct {
	// Git is a repository URL, or "owner/name" for a GitHub repository.
	Git string `json:"git,omitempty"`
	// Ref is a branch or tag to check out; empty means the default branch.
	Ref string `json:"ref,omitempty"`
	// Depth is the clone depth: empty for 1 (shallow, single branch), a
	// positive number, or "full" for all history.
	Depth string `json:"depth,omitempty"`
	// Username for authenticated clones (default "x-access-token").
	Username string `json:"username,omitempty"`
	// TokenSecret names the secret (in Workspace.Secrets) holding the
	// token. The token reaches git only through the environment of a
	// credential helper, never argv.
	TokenSecret string `json:"tokenSecret,omitempty"`
	// CloneOn is where the clone runs: "sandbox" (git inside the sandbox),
	// "host" (on the corral host, then copied in) or empty for automatic:
	// host for file:// URLs and local paths (which only the host can
	// reach), sandbox otherwise.
	CloneOn string `json:"cloneOn,omitempty"`
	// Dir is a host directory copied into the workspace at create.
	Dir string `json:"dir,omitempty"`
}

// SetupStep is one step of a setup plan: a serial command (Run) or a group
// of commands run at once (Parallel); exactly one is set. Serial steps
// share one shell, so "cd" and "export" carry over; a parallel group starts
// from that shell's directory and environment.
type SetupStep struct {
	Run      string   `json:"run,omitempty"`
	Parallel []string `json:"parallel,omitempty"`
}

// Skill is a file written into the workspace (Path + Content) or a git
// skill pack cloned shallowly (Git, optionally Into and TokenSecret).
type Skill struct {
	Path        string `json:"path,omitempty"`
	Content     string `json:"content,omitempty"`
	Git         string `json:"git,omitempty"`
	Into        string `json:"into,omitempty"`
	TokenSecret string `json:"tokenSecret,omitempty"`
}

// SkillsDir is where git skill packs go by default, under the workspace
// root.
const SkillsDir = ".corral/skills"

// Hash returns the workspace hash: the digest of its canonical encoding
// without secrets (see Canonical). A nil workspace hashes as the empty
// string, which the key leaves out.
func (w *Workspace) Hash() string {
	if w == nil {
		return ""
	}
	c := *w
	c.MCPServers = nil // projected per run, not built into the sandbox
	return Digest(&c)
}

// Validate checks the workspace for malformed values, naming the field.
func (w *Workspace) Validate() error {
	if w == nil {
		return nil
	}
	if s := w.Source; s != nil {
		if s.Git != "" && s.Dir != "" {
			return Errorf(InvalidArgument, "workspace", "source", "set either git or dir, not both")
		}
		if s.Git != "" {
			if err := ValidateGitValue("source.git", s.Git); err != nil {
				return err
			}
			if err := ValidateGitValue("source.ref", s.Ref); err != nil {
				return err
			}
			if _, err := ParseDepth(s.Depth); err != nil {
				return err
			}
			switch s.CloneOn {
			case "", "host", "sandbox":
			default:
				return Errorf(InvalidArgument, "workspace", "source.cloneOn", "%q is not host or sandbox", s.CloneOn)
			}
			if s.TokenSecret != "" {
				if _, ok := w.Secrets.Value(s.TokenSecret); !ok {
					return Errorf(InvalidArgument, "workspace", "source.tokenSecret", "unknown secret %q", s.TokenSecret)
				}
				if _, ok := w.Secrets.Broker(s.TokenSecret); ok {
					return Errorf(InvalidArgument, "workspace", "source.tokenSecret", "secret %q is brokered; a clone token cannot be brokered yet (no git credential helper through the gateway)", s.TokenSecret)
				}
			}
		}
		if (s.Ref != "" || s.Depth != "" || s.TokenSecret != "" || s.CloneOn != "") && s.Git == "" {
			return Errorf(InvalidArgument, "workspace", "source", "ref, depth, tokenSecret and cloneOn need a git source")
		}
	}
	for i, st := range w.Setup {
		if (st.Run == "") == (len(st.Parallel) == 0) {
			return Errorf(InvalidArgument, "workspace", "setup["+strconv.Itoa(i)+"]", "set exactly one of run and parallel")
		}
		for _, c := range st.Parallel {
			if strings.TrimSpace(c) == "" {
				return Errorf(InvalidArgument, "workspace", "setup["+strconv.Itoa(i)+"]", "empty parallel command")
			}
		}
	}
	for name := range w.Scripts {
		if name == "" {
			return Errorf(InvalidArgument, "workspace", "scripts", "empty script name")
		}
	}
	for i, sk := range w.Skills {
		field := "skills[" + strconv.Itoa(i) + "]"
		switch {
		case sk.Path != "" && sk.Git != "":
			return Errorf(InvalidArgument, "workspace", field, "set either path or git, not both")
		case sk.Path != "":
			if _, err := CleanPath(sk.Path); err != nil {
				return Errorf(InvalidArgument, "workspace", field, "bad path %q: %v", sk.Path, err)
			}
		case sk.Git != "":
			if err := ValidateGitValue(field+".git", sk.Git); err != nil {
				return err
			}
			if sk.Into != "" {
				if _, err := CleanPath(sk.Into); err != nil {
					return Errorf(InvalidArgument, "workspace", field, "bad into %q: %v", sk.Into, err)
				}
			}
			if sk.TokenSecret != "" {
				if _, ok := w.Secrets.Value(sk.TokenSecret); !ok {
					return Errorf(InvalidArgument, "workspace", field+".tokenSecret", "unknown secret %q", sk.TokenSecret)
				}
				if _, ok := w.Secrets.Broker(sk.TokenSecret); ok {
					return Errorf(InvalidArgument, "workspace", field+".tokenSecret", "secret %q is brokered; a clone token cannot be brokered yet", sk.TokenSecret)
				}
			}
		default:
			return Errorf(InvalidArgument, "workspace", field, "set path (a file skill) or git (a skill pack)")
		}
	}
	return ValidateMCPServers(w.MCPServers, w.Secrets)
}

// ValidateGitValue rejects a git URL, ref or path that git could read as
// an option (a leading '-') or that holds a NUL or newline.
func ValidateGitValue(field, v string) error {
	if strings.HasPrefix(v, "-") {
		return Errorf(InvalidArgument, "git", field, "value %q starts with '-'", v)
	}
	if strings.ContainsAny(v, "\x00\n\r") {
		return Errorf(InvalidArgument, "git", field, "value contains a NUL or newline")
	}
	return nil
}

// ParseDepth reads a clone depth: "" is 1, "full" is 0 (all history), and a
// positive integer is itself.
func ParseDepth(depth string) (int, error) {
	switch depth {
	case "":
		return 1, nil
	case "full":
		return 0, nil
	}
	n, err := strconv.Atoi(depth)
	if err != nil || n <= 0 {
		return 0, Errorf(InvalidArgument, "git", "depth", "%q is not a positive integer or \"full\"", depth)
	}
	return n, nil
}

var githubShort = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)

// GitURL expands "owner/name" to its GitHub URL and returns anything else
// unchanged.
func GitURL(repo string) string {
	if githubShort.MatchString(repo) && !strings.HasPrefix(repo, ".") {
		return "https://github.com/" + strings.TrimSuffix(repo, ".git") + ".git"
	}
	return repo
}

// IsHostGitURL reports whether a git URL names something only the host can
// reach: a file:// URL or a local path.
func IsHostGitURL(u string) bool {
	return strings.HasPrefix(u, "file://") || path.IsAbs(u) || strings.HasPrefix(u, "./") || strings.HasPrefix(u, "../")
}

// AgentsDocument returns the AGENTS.md content for the workspace: the
// instructions (or a file skill at AGENTS.md), then a "Workspace scripts"
// section listing each script sorted by name. Empty when there is nothing
// to say.
func (w *Workspace) AgentsDocument() string {
	if w == nil {
		return ""
	}
	base := w.Instructions
	if strings.TrimSpace(base) == "" {
		for _, sk := range w.Skills {
			if rel, err := CleanPath(sk.Path); err == nil && sk.Path != "" && rel == "AGENTS.md" {
				base = sk.Content
			}
		}
	}
	base = strings.TrimRight(base, " \t\n")
	if len(w.Scripts) == 0 {
		if base == "" {
			return ""
		}
		return base + "\n"
	}
	names := make([]string, 0, len(w.Scripts))
	for n := range w.Scripts {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	if base != "" {
		b.WriteString(base)
		b.WriteString("\n\n")
	}
	b.WriteString("## Workspace scripts\n\n")
	for _, n := range names {
		b.WriteString("- `" + n + "` → `" + w.Scripts[n] + "`\n")
	}
	return b.String()
}

// SecretsOrEmpty returns the workspace's secrets, or none for a nil
// workspace.
func (w *Workspace) SecretsOrEmpty() Secrets {
	if w == nil {
		return Secrets{}
	}
	return w.Secrets
}
