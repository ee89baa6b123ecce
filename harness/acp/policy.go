package acp

import (
	"path"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/sandbox"
)

// gate is what a permission request is about, for the policy: an approval
// kind and its target, or none for actions the policy does not gate
// (reading, searching, thinking).
type gate struct {
	kind   sandbox.ApprovalKind // "" when ungated
	target string
}

// gateFor maps an ACP tool call onto the policy: execute is a command
// (its text), edit/delete/move a file write (the path), fetch the network
// (the URL); read, search, think and switch_mode are not gated; anything
// else is a tool, named by its title.
func gateFor(tc acpsdk.ToolCallUpdate, root string) gate {
	var kind acpsdk.ToolKind = acpsdk.ToolKindOther
	if tc.Kind != nil && *tc.Kind != "" {
		kind = *tc.Kind
	}
	title := ""
	if tc.Title != nil {
		title = *tc.Title
	}
	input, _ := tc.RawInput.(map[string]any)
	switch kind {
	case acpsdk.ToolKindRead, acpsdk.ToolKindSearch, acpsdk.ToolKindThink, acpsdk.ToolKindSwitchMode:
		return gate{}
	case acpsdk.ToolKindExecute:
		if cmd := commandText(input); cmd != "" {
			return gate{kind: sandbox.ApproveCommand, target: cmd}
		}
		return gate{kind: sandbox.ApproveCommand, target: title}
	case acpsdk.ToolKindEdit, acpsdk.ToolKindDelete, acpsdk.ToolKindMove:
		p := ""
		for _, k := range []string{"path", "file_path", "filePath", "abs_path", "destination", "target"} {
			if s, ok := input[k].(string); ok && s != "" {
				p = s
				break
			}
		}
		if p == "" && len(tc.Locations) > 0 {
			p = tc.Locations[0].Path
		}
		if p == "" {
			return gate{kind: sandbox.ApproveFileWrite, target: title}
		}
		if rel, err := workspaceRel(p, root); err == nil {
			p = rel
		}
		return gate{kind: sandbox.ApproveFileWrite, target: p}
	case acpsdk.ToolKindFetch:
		for _, k := range []string{"url", "uri"} {
			if s, ok := input[k].(string); ok && s != "" {
				return gate{kind: sandbox.ApproveNetwork, target: s}
			}
		}
		return gate{kind: sandbox.ApproveNetwork, target: title}
	}
	if title == "" {
		title = "tool"
	}
	return gate{kind: sandbox.ApproveTool, target: title}
}

// commandText finds the command an execute tool call runs in its raw
// input: "command" (a string, or an argv), "cmd" or "commandLine", with
// "args" appended when the command is a program name.
func commandText(input map[string]any) string {
	for _, k := range []string{"command", "cmd", "commandLine", "script"} {
		switch v := input[k].(type) {
		case string:
			if v == "" {
				continue
			}
			if args := stringList(input["args"]); len(args) > 0 {
				return commandLine(v, args)
			}
			return v
		case []any:
			if argv := stringList(v); len(argv) > 0 {
				return commandLine(argv[0], argv[1:])
			}
		}
	}
	return ""
}

func stringList(v any) []string {
	list, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// commandLine is the text the policy matches for a program and its
// arguments: the script of a shell's -c (sh -c 'X' is X), else the argv
// quoted as shell words.
func commandLine(program string, args []string) string {
	switch path.Base(program) {
	case "sh", "bash", "zsh", "dash", "ash":
		for i := 0; i+1 < len(args); i++ {
			if strings.HasPrefix(args[i], "-") && strings.HasSuffix(args[i], "c") && !strings.HasPrefix(args[i], "--") {
				return args[i+1]
			}
		}
	}
	if len(args) == 0 {
		return program
	}
	return sandbox.ShellJoin(append([]string{program}, args...))
}

// workspaceRel returns a path the agent gave (absolute, in the sandbox's
// real file system, or relative to the workspace) relative to the
// workspace root, or an error when it is outside. root is the workspace's
// real path; the portable /workspace form is accepted too.
func workspaceRel(p, root string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 || p == "" {
		return "", sandbox.Errorf(sandbox.InvalidArgument, "harness.acp", p, "bad path")
	}
	if path.IsAbs(p) {
		p = path.Clean(p)
		if root != "" {
			root = path.Clean(root)
			if p == root {
				return ".", nil
			}
			if rel, ok := strings.CutPrefix(p, strings.TrimSuffix(root, "/")+"/"); ok {
				return rel, nil
			}
		}
	}
	rel, err := sandbox.CleanPath(p)
	if err != nil {
		return "", sandbox.Errorf(sandbox.PermissionDenied, "harness.acp", p, "the path is outside the workspace")
	}
	return rel, nil
}

// chooseOption picks the agent's option for a decision: allow once, else
// allow always; reject once, else reject always. ok is false when the agent
// offered none of the right kind (the answer is then "cancelled").
func chooseOption(options []acpsdk.PermissionOption, allow bool) (acpsdk.PermissionOptionId, bool) {
	prefs := []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways}
	if allow {
		prefs = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways}
	}
	for _, k := range prefs {
		for _, o := range options {
			if o.Kind == k {
				return o.OptionId, true
			}
		}
	}
	return "", false
}
