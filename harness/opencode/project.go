package opencode

import (
	"context"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// projection is what a run adds to the per-run opencode.json from the
// workspace: skill directories, MCP servers, and the environment that
// carries the servers' secret values.
type projection struct {
	skillPaths []string
	mcp        map[string]any
	env        map[string]string
}

// project finds the workspace's skills and turns its MCP servers into
// OpenCode's "mcp" configuration. Secret-bearing header and environment
// values move into environment variables (SecretEnvPrefix) referenced as
// {env:NAME}.
func project(ctx context.Context, h sandbox.Handle, req harness.Request) (projection, error) {
	var p projection
	skills, err := harness.FindSkills(ctx, h, req)
	if err != nil {
		return p, err
	}
	for _, s := range skills {
		p.skillPaths = append(p.skillPaths, s.Dir)
	}
	if len(req.MCPServers) == 0 {
		return p, nil
	}
	if err := sandbox.ValidateMCPServers(req.MCPServers, req.Secrets); err != nil {
		return p, err
	}
	se := harness.NewSecretEnv(req.Secrets)
	ref := func(name string) string { return "{env:" + name + "}" }
	values := func(m map[string]string) (map[string]string, error) {
		out := make(map[string]string, len(m))
		for _, k := range sandbox.SortedKeys(m) { // stable variable numbering
			v, err := se.Ref(m[k], ref)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	}
	p.mcp = make(map[string]any, len(req.MCPServers))
	for _, s := range req.MCPServers {
		entry := map[string]any{"enabled": true}
		switch s.Transport() {
		case sandbox.MCPHTTP, sandbox.MCPSSE:
			// OpenCode's remote servers try streamable HTTP, then SSE.
			entry["type"] = "remote"
			entry["url"] = s.URL
			if len(s.Headers) > 0 {
				hs, err := values(s.Headers)
				if err != nil {
					return p, err
				}
				entry["headers"] = hs
			}
		default:
			entry["type"] = "local"
			entry["command"] = append([]string{s.Command}, s.Args...)
			if len(s.Env) > 0 {
				es, err := values(s.Env)
				if err != nil {
					return p, err
				}
				entry["environment"] = es
			}
		}
		p.mcp[s.Name] = entry
	}
	// OpenCode substitutes {env:NAME} into the configuration's text before
	// parsing it as JSON, unescaped: the variables hold the values
	// JSON-escaped, so that a quote or backslash in a secret arrives as
	// itself.
	p.env = make(map[string]string, len(se.Env))
	for k, v := range se.Env {
		p.env[k] = strings.TrimSuffix(strings.TrimPrefix(jsonString(v), `"`), `"`)
	}
	return p, nil
}
