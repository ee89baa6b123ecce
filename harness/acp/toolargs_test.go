package acp_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
)

// TestToolArgumentsArriveLate: agents open a tool call (pending) with
// rawInput {} or a partial input while the model still streams the
// arguments and send them in a later update (opencode acp: {"cwd":…},
// then the command with in_progress; claude-agent-acp: {}). The call's one
// TOOL_CALL_ARGS must carry the real arguments, not the partial input.
func TestToolArgumentsArriveLate(t *testing.T) {
	const (
		open    = `{"corral_acp":"update","params":{"sessionId":"s","update":{"kind":"execute","rawInput":{},"sessionUpdate":"tool_call","status":"pending","title":"bash","toolCallId":"c"}}}`
		openNil = `{"corral_acp":"update","params":{"sessionId":"s","update":{"kind":"execute","sessionUpdate":"tool_call","status":"pending","title":"bash","toolCallId":"c"}}}`
		empty   = `{"corral_acp":"update","params":{"sessionId":"s","update":{"rawInput":{},"sessionUpdate":"tool_call_update","status":"pending","toolCallId":"c"}}}`
		openCwd = `{"corral_acp":"update","params":{"sessionId":"s","update":{"kind":"execute","rawInput":{"cwd":"/w"},"sessionUpdate":"tool_call","status":"pending","title":"bash","toolCallId":"c"}}}`
		argsCwd = `{"corral_acp":"update","params":{"sessionId":"s","update":{"rawInput":{"command":"ls -la","cwd":"/w"},"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":"c"}}}`
		args    = `{"corral_acp":"update","params":{"sessionId":"s","update":{"rawInput":{"command":"ls -la"},"sessionUpdate":"tool_call_update","status":"in_progress","toolCallId":"c"}}}`
		perm    = `{"corral_acp":"permission","toolCall":{"rawInput":{"command":"ls -la"},"title":"bash","toolCallId":"c"},"gate":"command","target":"ls -la","decision":"allow","approvalId":"acp:command:ls -la"}`
		done    = `{"corral_acp":"update","params":{"sessionId":"s","update":{"rawOutput":"ok","sessionUpdate":"tool_call_update","status":"completed","toolCallId":"c"}}}`
		doneIn  = `{"corral_acp":"update","params":{"sessionId":"s","update":{"rawInput":{"command":"ls -la"},"rawOutput":"ok","sessionUpdate":"tool_call_update","status":"completed","toolCallId":"c"}}}`
		tail    = `{"corral_acp":"prompt","stopReason":"end_turn"}` + "\n" + `{"corral_acp":"end"}`
	)
	cases := []struct {
		name, journal, want string
	}{
		{"args in an update", open + "\n" + empty + "\n" + args + "\n" + done, `{"command":"ls -la","title":"bash"}`},
		{"args in the permission request", open + "\n" + perm + "\n" + done, `{"command":"ls -la","title":"bash"}`},
		{"args with the completion", open + "\n" + empty + "\n" + doneIn, `{"command":"ls -la","title":"bash"}`},
		{"no input at first", openNil + "\n" + args + "\n" + done, `{"command":"ls -la","title":"bash"}`},
		{"partial input while pending", openCwd + "\n" + argsCwd + "\n" + done, `{"command":"ls -la","cwd":"/w","title":"bash"}`},
		{"never more than {}", open + "\n" + empty + "\n" + done, `{"title":"bash"}`},
		{"interrupted before its args", open, `{"title":"bash"}`},
	}
	delivered := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines := [][]byte{}
			for _, l := range strings.Split(c.journal+"\n"+tail, "\n") {
				lines = append(lines, []byte(l))
			}
			evs := translate(acp.New(acp.Options{}).Translator(harness.Run{RunID: "r", ThreadID: "t"}), lines, 0)
			checkWellFormed(t, evs)
			var got []string
			for _, e := range evs {
				if e.Type == event.ToolCallArgs {
					got = append(got, e.Delta)
				}
			}
			if len(got) != 1 || got[0] != c.want {
				t.Fatalf("TOOL_CALL_ARGS %q, want exactly %s:\n%s", got, c.want, dump(evs))
			}
			if strings.Contains(c.want, "ls -la") {
				delivered++
			}
		})
	}
	t.Logf("arguments delivered: %d of %d tool calls whose arguments came after an empty or partial rawInput", delivered, 5)
}
