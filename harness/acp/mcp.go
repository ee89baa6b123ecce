package acp

import (
	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// resolveMCP returns the request's MCP servers with their secret
// references expanded, for session/new and session/load (the values reach
// only the agent: requests are journaled without them).
func resolveMCP(req harness.Request) ([]sandbox.MCPServer, error) {
	return sandbox.ResolveMCPServers(req.MCPServers, req.Secrets)
}

// acpServers converts servers for session/new and session/load, leaving
// out the remote ones whose transport the agent did not advertise; their
// names are returned as skipped.
func acpServers(servers []sandbox.MCPServer, caps acpsdk.McpCapabilities) (out []acpsdk.McpServer, skipped []string) {
	out = []acpsdk.McpServer{}
	for _, s := range servers {
		switch s.Type {
		case "http", "sse":
			if (s.Type == "http" && !caps.Http) || (s.Type == "sse" && !caps.Sse) {
				skipped = append(skipped, s.Name)
				continue
			}
			headers := []acpsdk.HttpHeader{}
			for _, k := range sandbox.SortedKeys(s.Headers) {
				headers = append(headers, acpsdk.HttpHeader{Name: k, Value: s.Headers[k]})
			}
			if s.Type == "http" {
				out = append(out, acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Name: s.Name, Type: "http", Url: s.URL, Headers: headers}})
			} else {
				out = append(out, acpsdk.McpServer{Sse: &acpsdk.McpServerSseInline{Name: s.Name, Type: "sse", Url: s.URL, Headers: headers}})
			}
		default:
			env := []acpsdk.EnvVariable{}
			for _, k := range sandbox.SortedKeys(s.Env) {
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
