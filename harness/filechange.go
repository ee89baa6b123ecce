package harness

import "github.com/d10ffeed/corral/event"

// ToolFileChange returns the file.changed event a translator emits after a
// tool call that edited files, as the agent's output names them: the
// call's id and its paths (deduplicated, in order; as the tool gave them,
// often absolute in the sandbox), no patch. The run's final file.changed,
// from the wrapper's diff, has the patch and workspace-relative paths.
// With no path it returns false.
func ToolFileChange(toolCallID string, paths []string) (event.Event, bool) {
	seen := map[string]bool{}
	files := []string{}
	for _, p := range paths {
		if p != "" && !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	if len(files) == 0 || toolCallID == "" {
		return event.Event{}, false
	}
	return event.CustomEvent(event.FileChanged, event.FileChange{Files: files, ToolCallID: toolCallID}), true
}
