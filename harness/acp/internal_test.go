package acp

import (
	"encoding/json"
	"strings"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/sandbox"
)

func TestGateFor(t *testing.T) {
	const root = "/home/u/ws"
	kind := func(k acpsdk.ToolKind) *acpsdk.ToolKind { return &k }
	cases := []struct {
		name string
		tc   acpsdk.ToolCallUpdate
		want gate
	}{
		{"ExecuteString", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindExecute), RawInput: map[string]any{"command": "npm test"}}, gate{sandbox.ApproveCommand, "npm test"}},
		{"ExecuteArgv", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindExecute), RawInput: map[string]any{"command": []any{"go", "test", "./..."}}}, gate{sandbox.ApproveCommand, "go test ./..."}},
		{"ExecuteShellScript", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindExecute), RawInput: map[string]any{"command": []any{"bash", "-lc", "rm -rf build"}}}, gate{sandbox.ApproveCommand, "rm -rf build"}},
		{"ExecuteProgramAndArgs", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindExecute), RawInput: map[string]any{"cmd": "ls", "args": []any{"-la", "my dir"}}}, gate{sandbox.ApproveCommand, "ls -la 'my dir'"}},
		{"ExecuteTitleOnly", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindExecute), Title: acpsdk.Ptr("make")}, gate{sandbox.ApproveCommand, "make"}},
		{"EditAbsolute", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindEdit), RawInput: map[string]any{"path": root + "/src/a.go"}}, gate{sandbox.ApproveFileWrite, "src/a.go"}},
		{"EditLocation", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindDelete), Locations: []acpsdk.ToolCallLocation{{Path: "/workspace/b.txt"}}}, gate{sandbox.ApproveFileWrite, "b.txt"}},
		{"EditOutside", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindMove), RawInput: map[string]any{"file_path": "/etc/passwd"}}, gate{sandbox.ApproveFileWrite, "/etc/passwd"}},
		{"Fetch", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindFetch), RawInput: map[string]any{"url": "https://x.dev"}}, gate{sandbox.ApproveNetwork, "https://x.dev"}},
		{"Read", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindRead)}, gate{}},
		{"Think", acpsdk.ToolCallUpdate{Kind: kind(acpsdk.ToolKindThink)}, gate{}},
		{"Other", acpsdk.ToolCallUpdate{Title: acpsdk.Ptr("mcp__docs__search")}, gate{sandbox.ApproveTool, "mcp__docs__search"}},
		{"Nothing", acpsdk.ToolCallUpdate{}, gate{sandbox.ApproveTool, "tool"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := gateFor(c.tc, root); got != c.want {
				t.Errorf("gateFor = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestWorkspaceRel(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/r/ws", "."},
		{"/r/ws/a/b", "a/b"},
		{"/r/ws/a/../b", "b"},
		{"/workspace/x", "x"},
		{"rel/y", "rel/y"},
		{"/r/wsx/a", ""},
		{"/etc/passwd", ""},
		{"../up", ""},
		{"", ""},
	}
	for _, c := range cases {
		got, err := workspaceRel(c.in, "/r/ws/")
		if c.want == "" {
			if err == nil {
				t.Errorf("workspaceRel(%q) = %q, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("workspaceRel(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestChooseOption(t *testing.T) {
	opts := []acpsdk.PermissionOption{
		{Kind: acpsdk.PermissionOptionKindAllowAlways, OptionId: "aa"},
		{Kind: acpsdk.PermissionOptionKindRejectAlways, OptionId: "ra"},
		{Kind: acpsdk.PermissionOptionKindAllowOnce, OptionId: "a1"},
	}
	if id, ok := chooseOption(opts, true); !ok || id != "a1" {
		t.Errorf("allow picks allow_once first: %q", id)
	}
	if id, ok := chooseOption(opts, false); !ok || id != "ra" {
		t.Errorf("deny falls back to reject_always: %q", id)
	}
	if _, ok := chooseOption(opts[:1], false); ok {
		t.Error("no reject option: cancelled")
	}
}

func TestACPServers(t *testing.T) {
	servers, err := sandbox.ResolveMCPServers([]sandbox.MCPServer{{Name: "h", URL: "http://h"}, {Name: "s", Type: "sse", URL: "http://s"}, {Name: "l", Command: "c"}}, sandbox.Secrets{})
	if err != nil {
		t.Fatal(err)
	}
	out, skipped := acpServers(servers, acpsdk.McpCapabilities{Sse: true})
	if len(out) != 2 || out[0].Sse == nil || out[1].Stdio == nil || strings.Join(skipped, ",") != "h" {
		t.Errorf("acpServers = %+v, skipped %v", out, skipped)
	}
}

func TestRedaction(t *testing.T) {
	secrets, _ := sandbox.NewSecrets(map[string]string{"K": "hunter22", "N": "1"})
	var got []byte
	w := &journalWriter{w: writerFunc(func(p []byte) (int, error) { got = append(got, p...); return len(p), nil }), secrets: secrets}
	if err := w.write(record{Kind: recTerminalExit, Output: "key=hunter22", Params: json.RawMessage(`{"a":"x hunter22 y","n":1,"hunter22":true}`)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(got), "hunter22") || !json.Valid(got) {
		t.Errorf("record = %s", got)
	}
	if !strings.Contains(string(got), `"n":1`) {
		t.Errorf("numbers are not text to redact: %s", got)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestTerminalOutputBound(t *testing.T) {
	term := &terminal{limit: 8}
	_, _ = term.Write([]byte("0123456789"))
	_, _ = term.Write([]byte("é!"))
	out, cut := term.output(0)
	if !cut || len(out) > 8 || !strings.HasSuffix(out, "é!") {
		t.Errorf("output = %q, cut %v", out, cut)
	}
	if out, cut := term.output(3); out != "é!" && out != "!" || !cut {
		t.Errorf("a smaller limit keeps whole runes: %q", out)
	}
}
