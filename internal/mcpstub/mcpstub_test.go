package mcpstub_test

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/mcpstub"
	"github.com/d10ffeed/corral/internal/testutil"
)

func TestServer(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node is not installed (scripts/setup-agents.sh installs it)")
	}
	cmd := exec.Command(node, mcpstub.Write(t), "docs")
	cmd.Env = append(os.Environ(), mcpstub.TokenEnv+"=s3cret")
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var replies []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		replies = append(replies, m)
	}
	if len(replies) != 2 {
		t.Fatalf("replies = %v", replies)
	}
	tools := replies[1]["result"].(map[string]any)["tools"].([]any)
	tool := tools[0].(map[string]any)
	if tool["name"] != mcpstub.ToolName("docs") || !strings.Contains(tool["description"].(string), mcpstub.Digest("s3cret")) {
		t.Errorf("tool = %v", tool)
	}
	if strings.Contains(string(out), "s3cret") {
		t.Error("the server must not echo the token")
	}
}
