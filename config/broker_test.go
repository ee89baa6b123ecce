package config_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/config"
)

// TestBrokeredSecrets reads the broker forms (host, hosts, each header
// mode) next to a plain secret, and checks what the definition keeps: the
// value for the gateway, nothing of it in the sandbox's environment.
func TestBrokeredSecrets(t *testing.T) {
	const yml = `workspace:
  secrets:
    ANTHROPIC_API_KEY: {env: K1, broker: {hosts: [api.anthropic.com], header: x-api-key}}
    OPENAI_API_KEY: {env: K2, broker: {host: api.openai.com, header: bearer, fallback: env}}
    GH: {env: K3, broker: {hosts: ["http://127.0.0.1:9", api.github.com], header: basic, baseURLEnv: GH_URL}}
    PLAIN: {env: K4}
`
	f, err := config.Parse([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"K1": "v1", "K2": "v2", "K3": "v3", "K4": "v4"}
	def, err := f.Definition(config.BuildOptions{Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	s := def.Workspace.Secrets
	if got := strings.Join(s.Brokered(), ","); got != "ANTHROPIC_API_KEY,GH,OPENAI_API_KEY" {
		t.Errorf("brokered %s", got)
	}
	if b, _ := s.Broker("OPENAI_API_KEY"); b.HeaderName() != "Authorization" || b.Hosts[0] != "api.openai.com" || b.BaseURLVar("OPENAI_API_KEY") != "OPENAI_BASE_URL" || b.Fallback != "env" {
		t.Errorf("openai broker %+v", b)
	}
	if b, _ := s.Broker("GH"); len(b.Hosts) != 2 || b.BaseURLVar("GH") != "GH_URL" {
		t.Errorf("gh broker %+v", b)
	}
	if e := s.Env(); len(e) != 1 || e["PLAIN"] != "v4" {
		t.Errorf("sandbox env %v: only PLAIN may be there", e)
	}
	if v, _ := s.Value("ANTHROPIC_API_KEY"); v != "v1" {
		t.Errorf("value %q", v)
	}
}

func TestBrokerErrors(t *testing.T) {
	for _, tt := range []struct {
		name, broker string
		want         []string
	}{
		{"no hosts", "{header: x-api-key}", []string{"line 3", "broker.hosts", "at least one host"}},
		{"no header", "{hosts: [a.example]}", []string{"line 3", "broker.header", "bearer, basic"}},
		{"bad header", `{hosts: [a.example], header: "x y"}`, []string{"is not bearer, basic or a header name"}},
		{"host with path", "{hosts: [a.example/v1], header: bearer}", []string{"no path"}},
		{"bad baseURLEnv", "{hosts: [a.example], header: bearer, baseURLEnv: \"A=B\"}", []string{"baseURLEnv"}},
		{"bad fallback", "{hosts: [a.example], header: bearer, fallback: open}", []string{"broker.fallback", "want env"}},
		{"unknown key", "{hosts: [a.example], header: bearer, path: /x}", []string{`unknown key "path"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := config.Parse([]byte("workspace:\n  secrets:\n    TOK: {env: K, broker: " + tt.broker + "}\n"))
			if err == nil {
				_, err = f.Definition(config.BuildOptions{Getenv: func(string) (string, bool) { return "v", true }})
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// A brokered secret cannot be a clone token or an MCP header.
	for _, yml := range []string{
		"workspace:\n  source: {git: x/y, tokenSecret: TOK}\n  secrets:\n    TOK: {env: K, broker: {hosts: [github.com], header: basic}}\n",
		"workspace:\n  mcpServers:\n    - {name: d, url: \"https://d.example/mcp\", headers: {Authorization: \"Bearer ${secret:TOK}\"}}\n  secrets:\n    TOK: {env: K, broker: {hosts: [d.example], header: bearer}}\n",
	} {
		f, err := config.Parse([]byte(yml))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Definition(config.BuildOptions{Getenv: func(string) (string, bool) { return "v", true }}); err == nil || !strings.Contains(err.Error(), "brokered") {
			t.Errorf("%q: error %v, want one saying the secret is brokered", yml, err)
		}
	}
}

func TestNetworkAllowList(t *testing.T) {
	f, err := config.Parse([]byte("policy:\n  network: {allow: [api.anthropic.com, \"*.npmjs.org\", \"127.0.0.1:8080\"]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := f.Definition(config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(def.Policy.Egress, ","); got != "api.anthropic.com,*.npmjs.org,127.0.0.1:8080" || def.Policy.Network != "" {
		t.Errorf("egress %q network %q", got, def.Policy.Network)
	}
	for _, tt := range []struct{ yml, want string }{
		{"policy:\n  network: {allow: []}\n", "at least one host"},
		{"policy:\n  network: {deny: [x]}\n", `unknown key "deny"`},
		{"policy:\n  network: {allow: [\"https://x.example\"]}\n", "want host, host:port or *.domain"},
		{"policy:\n  network: {allow: [\"a.*.example\"]}\n", "want host, host:port or *.domain"},
		{"policy:\n  network: sometimes\n", "is not one of allow, ask, deny"},
	} {
		f, err := config.Parse([]byte(tt.yml))
		if err == nil {
			_, err = f.Definition(config.BuildOptions{})
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v, want %q", tt.yml, err, tt.want)
		}
	}
}
