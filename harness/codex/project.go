package codex

import (
	"bytes"
	"context"
	"path"
	"regexp"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// reservedEnv are variables the harness sets or unsets itself; an MCP
// server's secret-bearing env var may not take their names.
var reservedEnv = map[string]bool{"CODEX_HOME": true, "CODEX_API_KEY": true, "OPENAI_API_KEY": true}

// tomlKV is one key of an MCP server's table, its value already TOML.
type tomlKV struct{ key, value string }

// mcpServer is one server in codex's terms.
type mcpServer struct {
	name string
	kvs  []tomlKV
}

// mcpPlan is the workspace's MCP servers in codex's terms: what goes into
// the configuration (no secret value in it) and the variables codex's
// environment must carry for it (the secret values).
type mcpPlan struct {
	servers []mcpServer
	env     map[string]string
	asks    []string // servers whose tools the policy asks about, unanswered
}

// planMCP maps the request's MCP servers onto codex's mcp_servers tables.
// Literal values are inline; a stdio env value naming a secret becomes a
// variable of the same name in codex's environment, forwarded with
// env_vars; a header naming a secret becomes a fresh variable
// (harness.MCPValuePrefix) read with env_http_headers.
func planMCP(req harness.Request) (mcpPlan, error) {
	const op = "harness.codex"
	plan := mcpPlan{env: map[string]string{}}
	if len(req.MCPServers) == 0 {
		return plan, nil
	}
	if err := sandbox.ValidateMCPServers(req.MCPServers, req.Secrets); err != nil {
		return plan, err
	}
	se := harness.NewSecretEnv(req.Secrets)
	owner := map[string]string{} // env var -> server that set it
	setEnv := func(server, name, value string) error {
		if reservedEnv[name] {
			return sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID,
				"MCP server %q: env %s names a secret, but codex's own %s cannot carry it", server, name, name)
		}
		if v, ok := plan.env[name]; ok && v != value {
			return sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID,
				"MCP servers %q and %q both need env %s, with different values (codex passes it from its one environment)", owner[name], server, name)
		}
		if v, ok := req.Env[name]; ok && v != value {
			return sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID,
				"MCP server %q needs env %s, which the run's environment sets to something else", server, name)
		}
		plan.env[name], owner[name] = value, server
		return nil
	}
	for _, s := range req.MCPServers {
		var kvs []tomlKV
		switch s.Transport() {
		case sandbox.MCPSSE:
			return plan, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID,
				"MCP server %q uses the sse transport, which codex does not speak (stdio and streamable http only)", s.Name)
		case sandbox.MCPStdio:
			kvs = append(kvs, tomlKV{"command", tomlString(s.Command)})
			if len(s.Args) > 0 {
				kvs = append(kvs, tomlKV{"args", tomlArray(s.Args)})
			}
			literal := map[string]string{}
			var forwarded []string
			for _, k := range sandbox.SortedKeys(s.Env) {
				v := s.Env[k]
				if !sandbox.HasSecretRef(v) {
					literal[k] = v
					continue
				}
				x, err := sandbox.ExpandSecretRefs(v, req.Secrets)
				if err != nil {
					return plan, err
				}
				if err := setEnv(s.Name, k, x); err != nil {
					return plan, err
				}
				forwarded = append(forwarded, k)
			}
			if len(literal) > 0 {
				kvs = append(kvs, tomlKV{"env", tomlTable(literal)})
			}
			if len(forwarded) > 0 {
				kvs = append(kvs, tomlKV{"env_vars", tomlArray(forwarded)})
			}
		default: // http
			kvs = append(kvs, tomlKV{"url", tomlString(s.URL)})
			literal := map[string]string{}
			fromEnv := map[string]string{}
			for _, k := range sandbox.SortedKeys(s.Headers) {
				v := s.Headers[k]
				if !sandbox.HasSecretRef(v) {
					literal[k] = v
					continue
				}
				name, err := se.Var(v)
				if err != nil {
					return plan, err
				}
				if err := setEnv(s.Name, name, se.Env[name]); err != nil {
					return plan, err
				}
				fromEnv[k] = name
			}
			if len(literal) > 0 {
				kvs = append(kvs, tomlKV{"http_headers", tomlTable(literal)})
			}
			if len(fromEnv) > 0 {
				kvs = append(kvs, tomlKV{"env_http_headers", tomlTable(fromEnv)})
			}
		}
		switch res := toolsDecision(req, s.Name); {
		case res.Decision == sandbox.Allow:
			kvs = append(kvs, tomlKV{"default_tools_approval_mode", `"approve"`})
		case res.NeedsApproval:
			plan.asks = append(plan.asks, s.Name)
		}
		plan.servers = append(plan.servers, mcpServer{name: s.Name, kvs: kvs})
	}
	return plan, nil
}

// toolsDecision is the policy's decision on the tools of MCP server name:
// allow without a policy, else the decision on approval id
// "codex:tool:mcp__NAME" (the policy's default, or an answer in
// Request.Approvals); NeedsApproval when it asks and nobody answered
// yet. Codex runs with approval_policy "never", under which it refuses
// every MCP tool call ("MCP tool call requires approval") unless the
// server's default_tools_approval_mode is "approve".
func toolsDecision(req harness.Request, name string) sandbox.Resolution {
	if req.Policy == nil {
		return sandbox.Resolution{Decision: sandbox.Allow}
	}
	return req.Policy.Resolve(sandbox.ApprovalRequest{Provider: Name, Kind: sandbox.ApproveTool, Target: "mcp__" + name}, req.Scripts, req.Approvals)
}

// toml writes the servers as config.toml tables.
func (p mcpPlan) toml() []byte {
	var b bytes.Buffer
	for _, s := range p.servers {
		b.WriteString("\n[mcp_servers." + tomlKey(s.name) + "]\n")
		for _, kv := range s.kvs {
			b.WriteString(kv.key + " = " + kv.value + "\n")
		}
	}
	return b.Bytes()
}

// overrides returns the servers as codex -c overrides.
func (p mcpPlan) overrides() []string {
	var args []string
	for _, s := range p.servers {
		for _, kv := range s.kvs {
			args = append(args, "-c", "mcp_servers."+tomlKey(s.name)+"."+kv.key+"="+kv.value)
		}
	}
	return args
}

var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlKey returns k as a TOML key: bare when it can be, else quoted.
func tomlKey(k string) string {
	if bareKeyRE.MatchString(k) {
		return k
	}
	return tomlString(k)
}

// tomlArray is a TOML array of strings.
func tomlArray(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = tomlString(v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// tomlTable is a TOML inline table of strings, keys in order.
func tomlTable(m map[string]string) string {
	kvs := make([]string, 0, len(m))
	for _, k := range sandbox.SortedKeys(m) {
		kvs = append(kvs, tomlKey(k)+" = "+tomlString(m[k]))
	}
	return "{ " + strings.Join(kvs, ", ") + " }"
}

// linkSkills projects the workspace's skills into home/skills, where codex
// reads a user's skills.
func linkSkills(ctx context.Context, h sandbox.Handle, req harness.Request, home string) error {
	skills, err := harness.FindSkills(ctx, h, req)
	if err != nil {
		return err
	}
	return harness.LinkSkills(ctx, h, path.Join(home, "skills"), skills)
}
