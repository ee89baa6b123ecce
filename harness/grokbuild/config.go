package grokbuild

import (
	"bytes"

	"github.com/pelletier/go-toml/v2"

	"github.com/d10ffeed/corral/sandbox"
)

// ConfigPath is Grok Build's project configuration, relative to the
// workspace root.
const ConfigPath = ".grok/config.toml"

// mergeConfig adds servers to a Grok configuration document under
// [mcp_servers.<name>]: url and a [headers] table for remote servers,
// command, args and an [env] table for local ones, and enabled = true.
// Every other key of the document, and every other key of a server table
// that already had the name, is kept. An existing document that is not
// TOML is an error (it is never overwritten). The result is canonical TOML:
// comments and layout do not survive, which is why the harness restores
// the original bytes after the run.
func mergeConfig(existing []byte, servers []sandbox.MCPServer) ([]byte, error) {
	doc := map[string]any{}
	if len(bytes.TrimSpace(existing)) > 0 {
		if err := toml.Unmarshal(existing, &doc); err != nil {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, "harness.grok", ConfigPath, "the workspace's Grok configuration is not valid TOML; not touching it: %v", err)
		}
	}
	table := map[string]any{}
	if v, ok := doc["mcp_servers"]; ok {
		t, ok := v.(map[string]any)
		if !ok {
			return nil, sandbox.Errorf(sandbox.FailedPrecondition, "harness.grok", ConfigPath, "mcp_servers in the workspace's Grok configuration is not a table")
		}
		table = t
	}
	for _, s := range servers {
		entry, ok := table[s.Name].(map[string]any)
		if !ok {
			entry = map[string]any{}
		}
		if s.URL != "" {
			delete(entry, "command")
			delete(entry, "args")
			entry["url"] = s.URL
			if len(s.Headers) > 0 {
				entry["headers"] = stringTable(s.Headers)
			}
		} else {
			delete(entry, "url")
			entry["command"] = s.Command
			args := s.Args
			if args == nil {
				args = []string{}
			}
			entry["args"] = args
			if len(s.Env) > 0 {
				entry["env"] = stringTable(s.Env)
			}
		}
		entry["enabled"] = true
		table[s.Name] = entry
	}
	doc["mcp_servers"] = table
	out, err := toml.Marshal(doc)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "harness.grok", ConfigPath, err)
	}
	return out, nil
}

func stringTable(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
