package acp

import (
	"encoding/json"
	"regexp"
	"sort"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/sandbox"
)

// OptionMCPServers is the Request.Options key holding the MCP servers to
// give the agent, as a JSON array of MCPServer. Header and environment
// values may name workspace secrets as ${secret:NAME}; they are expanded
// here and reach only the agent (never argv, the journal or events).
const OptionMCPServers = "mcpServers"

// MCPServer is an MCP server for the agent: remote (URL, with Type "http"
// or "sse"; "http" when empty) or local (Command, run by the agent).
type MCPServer struct {
	Name    string            `json:"name"`
	Type    string            `json:"type,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

var secretRef = regexp.MustCompile(`\$\{secret:([^}]*)\}`)

// ParseMCPServers reads the MCP servers of a run from its options (see
// OptionMCPServers), expanding secret references. No option is no
// servers.
func ParseMCPServers(options map[string]string, secrets sandbox.Secrets) ([]MCPServer, error) {
	spec := options[OptionMCPServers]
	if spec == "" {
		return nil, nil
	}
	var servers []MCPServer
	if err := json.Unmarshal([]byte(spec), &servers); err != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "harness.mcp", OptionMCPServers, "not a JSON array of servers: %v", err)
	}
	seen := map[string]bool{}
	for i := range servers {
		s := &servers[i]
		switch {
		case s.Name == "":
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "harness.mcp", OptionMCPServers, "server %d has no name", i)
		case seen[s.Name]:
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "harness.mcp", s.Name, "two MCP servers with one name")
		case (s.URL == "") == (s.Command == ""):
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "harness.mcp", s.Name, "set exactly one of url and command")
		}
		seen[s.Name] = true
		if s.URL != "" {
			switch s.Type {
			case "":
				s.Type = "http"
			case "http", "sse":
			default:
				return nil, sandbox.Errorf(sandbox.InvalidArgument, "harness.mcp", s.Name, "type %q is not http or sse", s.Type)
			}
		} else {
			s.Type = "stdio"
		}
		for _, m := range []map[string]string{s.Headers, s.Env} {
			for k, v := range m {
				x, err := expandSecrets(v, secrets, s.Name)
				if err != nil {
					return nil, err
				}
				m[k] = x
			}
		}
	}
	return servers, nil
}

func expandSecrets(v string, secrets sandbox.Secrets, server string) (string, error) {
	var missing string
	out := secretRef.ReplaceAllStringFunc(v, func(ref string) string {
		name := secretRef.FindStringSubmatch(ref)[1]
		val, ok := secrets.Value(name)
		if !ok {
			missing = name
		}
		return val
	})
	if missing != "" {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "harness.mcp", server, "unknown secret %q", missing)
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// acpServers converts servers for session/new and session/load, leaving
// out the remote ones whose transport the agent did not advertise; their
// names are returned as skipped.
func acpServers(servers []MCPServer, caps acpsdk.McpCapabilities) (out []acpsdk.McpServer, skipped []string) {
	out = []acpsdk.McpServer{}
	for _, s := range servers {
		switch s.Type {
		case "http", "sse":
			if (s.Type == "http" && !caps.Http) || (s.Type == "sse" && !caps.Sse) {
				skipped = append(skipped, s.Name)
				continue
			}
			headers := []acpsdk.HttpHeader{}
			for _, k := range sortedKeys(s.Headers) {
				headers = append(headers, acpsdk.HttpHeader{Name: k, Value: s.Headers[k]})
			}
			if s.Type == "http" {
				out = append(out, acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Name: s.Name, Type: "http", Url: s.URL, Headers: headers}})
			} else {
				out = append(out, acpsdk.McpServer{Sse: &acpsdk.McpServerSseInline{Name: s.Name, Type: "sse", Url: s.URL, Headers: headers}})
			}
		default:
			env := []acpsdk.EnvVariable{}
			for _, k := range sortedKeys(s.Env) {
				env = append(env, acpsdk.EnvVariable{Name: k, Value: s.Env[k]})
			}
			args := s.Args
			if args == nil {
				args = []string{}
			}
			out = append(out, acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: s.Name, Command: s.Command, Args: args, Env: env}})
		}
	}
	return out, skipped
}
