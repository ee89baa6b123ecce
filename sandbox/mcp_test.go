package sandbox_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestResolveMCPServers(t *testing.T) {
	secrets, _ := sandbox.NewSecrets(map[string]string{"TOK": "t0k"})
	cases := []struct {
		name    string
		servers []sandbox.MCPServer
		ok      bool
	}{
		{"Empty", nil, true},
		{"Remote", []sandbox.MCPServer{{Name: "a", URL: "http://h", Headers: map[string]string{"Authorization": "Bearer ${secret:TOK}"}}}, true},
		{"Local", []sandbox.MCPServer{{Name: "b", Command: "npx", Args: []string{"-y", "x"}, Env: map[string]string{"K": "${secret:TOK}"}}}, true},
		{"SSE", []sandbox.MCPServer{{Name: "s", Type: "sse", URL: "http://h"}}, true},
		{"NoName", []sandbox.MCPServer{{URL: "http://h"}}, false},
		{"BadName", []sandbox.MCPServer{{Name: "a b", URL: "http://h"}}, false},
		{"Duplicate", []sandbox.MCPServer{{Name: "a", URL: "http://h"}, {Name: "a", Command: "x"}}, false},
		{"BothKinds", []sandbox.MCPServer{{Name: "a", URL: "http://h", Command: "x"}}, false},
		{"Neither", []sandbox.MCPServer{{Name: "a"}}, false},
		{"BadType", []sandbox.MCPServer{{Name: "a", URL: "http://h", Type: "ws"}}, false},
		{"StdioWithURL", []sandbox.MCPServer{{Name: "a", URL: "http://h", Type: "stdio"}}, false},
		{"HeadersOnCommand", []sandbox.MCPServer{{Name: "a", Command: "x", Headers: map[string]string{"X": "y"}}}, false},
		{"EnvOnURL", []sandbox.MCPServer{{Name: "a", URL: "http://h", Env: map[string]string{"X": "y"}}}, false},
		{"BadEnvName", []sandbox.MCPServer{{Name: "a", Command: "x", Env: map[string]string{"1X": "y"}}}, false},
		{"SecretInArgs", []sandbox.MCPServer{{Name: "a", Command: "x", Args: []string{"--token=${secret:TOK}"}}}, false},
		{"SecretInURL", []sandbox.MCPServer{{Name: "a", URL: "http://h/?k=${secret:TOK}"}}, false},
		{"UnknownSecret", []sandbox.MCPServer{{Name: "a", URL: "http://h", Headers: map[string]string{"X": "${secret:NOPE}"}}}, false},
		{"Newline", []sandbox.MCPServer{{Name: "a", URL: "http://h", Headers: map[string]string{"X": "a\nb"}}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sandbox.ResolveMCPServers(c.servers, secrets)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				if sandbox.CodeOf(err) != sandbox.InvalidArgument {
					t.Errorf("code = %s", sandbox.CodeOf(err))
				}
				if strings.Contains(err.Error(), "t0k") {
					t.Error("an error must not carry a secret")
				}
				return
			}
			for i, s := range got {
				if s.Type == "" {
					t.Errorf("server %d has no type", i)
				}
			}
		})
	}
	in := []sandbox.MCPServer{{Name: "a", URL: "http://h", Headers: map[string]string{"Authorization": "Bearer ${secret:TOK}"}}}
	got, err := sandbox.ResolveMCPServers(in, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Headers["Authorization"] != "Bearer t0k" || got[0].Type != "http" {
		t.Errorf("resolved = %+v", got[0])
	}
	if in[0].Headers["Authorization"] != "Bearer ${secret:TOK}" {
		t.Error("resolving changed the caller's servers")
	}
}

func TestMCPServersOutsideTheHash(t *testing.T) {
	a := &sandbox.Workspace{Instructions: "x"}
	b := &sandbox.Workspace{Instructions: "x", MCPServers: []sandbox.MCPServer{{Name: "docs", URL: "http://h"}}}
	if a.Hash() != b.Hash() {
		t.Error("MCP servers are projected per run: they must not change the workspace hash")
	}
	if err := b.Validate(); err != nil {
		t.Fatal(err)
	}
	b.MCPServers = append(b.MCPServers, sandbox.MCPServer{Name: "docs", Command: "x"})
	if err := b.Validate(); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("Validate = %v", err)
	}
}

func TestSkillRoots(t *testing.T) {
	w := &sandbox.Workspace{Skills: []sandbox.Skill{
		{Git: "https://example.com/team/skills.git"},
		{Git: "https://example.com/other.git", Into: "tools/other"},
		{Path: "skills/review/SKILL.md", Content: "x"},
		{Path: "notes.md", Content: "x"},
		{Git: "https://example.com/team/skills"}, // same directory again
	}}
	got := strings.Join(w.SkillRoots(), ",")
	if want := ".corral/skills/skills,tools/other,skills/review"; got != want {
		t.Errorf("SkillRoots = %s, want %s", got, want)
	}
	if (*sandbox.Workspace)(nil).SkillRoots() != nil {
		t.Error("a nil workspace has no skills")
	}
}
