package sandbox

import (
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// MCPServer is an MCP server given to the agent of every run in a
// workspace: remote (URL, Type "http" or "sse"; "http" when empty) or
// local (Command and Args, run by the agent inside the sandbox, Type
// "stdio" or empty).
//
// Header and Env values may name workspace secrets as ${secret:NAME}. Such
// a value reaches the agent only through its environment or a per-run
// configuration file that is removed after the run; it is never written
// into argv, the journal, events, stores or snapshots. The other fields
// must not hold a secret reference: they can end up in a command line.
type MCPServer struct {
	Name    string            `json:"name"`
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// MCP transport types.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
	MCPSSE   = "sse"
)

var (
	secretRefRE = regexp.MustCompile(`\$\{secret:([^}]*)\}`)
	mcpNameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	mcpEnvRE    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Transport returns the server's transport: its Type, or the default for
// its kind (stdio with a command, http with a URL).
func (m MCPServer) Transport() string {
	switch {
	case m.Type != "":
		return m.Type
	case m.Command != "":
		return MCPStdio
	default:
		return MCPHTTP
	}
}

// Remote reports whether the server is reached by URL.
func (m MCPServer) Remote() bool { return m.URL != "" }

// HasSecretRef reports whether v names a secret as ${secret:NAME}.
func HasSecretRef(v string) bool { return secretRefRE.MatchString(v) }

// ExpandSecretRefs replaces every ${secret:NAME} in v with the secret's
// value. An unknown name is an InvalidArgument error naming it (never a
// value).
func ExpandSecretRefs(v string, secrets Secrets) (string, error) {
	var missing string
	out := secretRefRE.ReplaceAllStringFunc(v, func(ref string) string {
		name := secretRefRE.FindStringSubmatch(ref)[1]
		val, ok := secrets.Value(name)
		if !ok && missing == "" {
			missing = name
		}
		return val
	})
	if missing != "" {
		return "", Errorf(InvalidArgument, "secret", missing, "unknown secret %q", missing)
	}
	return out, nil
}

// ValidateMCPServers checks a list of servers: names unique and usable as
// configuration keys, exactly one of URL and Command, a transport that
// fits, environment names valid, and secret references only in header and
// environment values, naming secrets that exist.
func ValidateMCPServers(servers []MCPServer, secrets Secrets) error {
	seen := map[string]bool{}
	for i, s := range servers {
		field := "mcpServers[" + strconv.Itoa(i) + "]"
		fail := func(format string, args ...any) error {
			return Errorf(InvalidArgument, "workspace", field, format, args...)
		}
		switch {
		case !mcpNameRE.MatchString(s.Name):
			return fail("name %q: want letters, digits, '-' and '_' (at most 64, not starting with '-' or '_')", s.Name)
		case seen[s.Name]:
			return fail("two MCP servers named %q", s.Name)
		case (s.URL == "") == (s.Command == ""):
			return fail("server %q: set exactly one of url and command", s.Name)
		}
		seen[s.Name] = true
		switch t := s.Transport(); {
		case s.Remote() && t != MCPHTTP && t != MCPSSE:
			return fail("server %q: type %q is not http or sse (a server with a url)", s.Name, t)
		case !s.Remote() && t != MCPStdio:
			return fail("server %q: type %q is not stdio (a server with a command)", s.Name, t)
		case s.Remote() && (len(s.Args) > 0 || len(s.Env) > 0):
			return fail("server %q: args and env need a command, not a url", s.Name)
		case !s.Remote() && len(s.Headers) > 0:
			return fail("server %q: headers need a url, not a command", s.Name)
		}
		plain := append([]string{s.URL, s.Command}, s.Args...)
		for _, v := range plain {
			if HasSecretRef(v) {
				return fail("server %q: a secret may be named only in headers and env (url, command and args can end up in a command line)", s.Name)
			}
		}
		for k := range s.Env {
			if !mcpEnvRE.MatchString(k) {
				return fail("server %q: environment name %q: want letters, digits and '_', not starting with a digit", s.Name, k)
			}
		}
		for k := range s.Headers {
			if k == "" || strings.ContainsAny(k, " \t\r\n:") {
				return fail("server %q: bad header name %q", s.Name, k)
			}
		}
		for _, m := range []map[string]string{s.Headers, s.Env} {
			for _, k := range SortedKeys(m) {
				if strings.ContainsAny(m[k], "\x00\r\n") {
					return fail("server %q: value of %s holds a NUL or newline", s.Name, k)
				}
				if _, err := ExpandSecretRefs(m[k], secrets); err != nil {
					return fail("server %q: %s: %v", s.Name, k, err)
				}
				for _, ref := range secretRefRE.FindAllStringSubmatch(m[k], -1) {
					if _, ok := secrets.Broker(ref[1]); ok {
						return fail("server %q: %s: secret %q is brokered (it never enters the sandbox); an MCP server cannot use it", s.Name, k, ref[1])
					}
				}
			}
		}
	}
	return nil
}

// ResolveMCPServers returns deep copies of servers with Type filled in and
// every secret reference expanded. The result carries secret values: hand
// it only to the agent.
func ResolveMCPServers(servers []MCPServer, secrets Secrets) ([]MCPServer, error) {
	if err := ValidateMCPServers(servers, secrets); err != nil {
		return nil, err
	}
	out := make([]MCPServer, len(servers))
	for i, s := range servers {
		r := s
		r.Type = s.Transport()
		r.Args = append([]string(nil), s.Args...)
		var err error
		if r.Headers, err = expandMap(s.Headers, secrets); err != nil {
			return nil, err
		}
		if r.Env, err = expandMap(s.Env, secrets); err != nil {
			return nil, err
		}
		out[i] = r
	}
	return out, nil
}

func expandMap(m map[string]string, secrets Secrets) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := ExpandSecretRefs(v, secrets)
		if err != nil {
			return nil, err
		}
		out[k] = x
	}
	return out, nil
}

// SortedKeys returns a map's keys in order.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SkillRoots returns the workspace-relative directories that hold the
// workspace's skills: each git skill pack's directory, and the directory
// of each file skill named SKILL.md. Harnesses look for SKILL.md files
// under them and project them into their agent's own skill directory.
func (w *Workspace) SkillRoots() []string {
	if w == nil {
		return nil
	}
	var roots []string
	seen := map[string]bool{}
	add := func(p string) {
		rel, err := CleanPath(p)
		if err != nil || seen[rel] {
			return
		}
		seen[rel] = true
		roots = append(roots, rel)
	}
	for _, sk := range w.Skills {
		switch {
		case sk.Git != "":
			add(sk.PackDir())
		case sk.Path != "" && path.Base(sk.Path) == "SKILL.md":
			add(path.Dir(sk.Path))
		}
	}
	return roots
}

// PackDir is where a git skill pack goes in the workspace: Into, or
// SkillsDir/<repository name>.
func (sk Skill) PackDir() string {
	if sk.Into != "" {
		return sk.Into
	}
	base := path.Base(strings.TrimSuffix(strings.TrimSuffix(sk.Git, "/"), ".git"))
	if base == "." || base == "/" || base == "" {
		base = "skill"
	}
	return path.Join(SkillsDir, base)
}
