package run

import (
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// patchFile is one file of a git patch: its path (the "b/" side of its
// "diff --git" header) and what happened to it.
type patchFile struct {
	Path string
	Op   string // "create", "delete" or "change"
}

// parsePatch reads a git patch into its files, in order, one entry per
// "diff --git a/… b/…" header. A "new file mode" or "deleted file mode"
// line of a file's section makes it a create or a delete; anything else
// is a change. Content lines of a patch start with ' ', '+', '-' or '\',
// so a header can never be mistaken for content.
func parsePatch(patch []byte) []patchFile {
	var out []patchFile
	cur := -1 // the file whose section this is; -1 before the first or after a malformed header
	for _, line := range strings.Split(string(patch), "\n") {
		if rest, ok := strings.CutPrefix(line, "diff --git "); ok {
			cur = -1
			if name, ok := strings.CutPrefix(rest, "a/"); ok {
				if i := strings.Index(name, " b/"); i >= 0 {
					out = append(out, patchFile{Path: name[i+3:], Op: "change"})
					cur = len(out) - 1
				}
			}
			continue
		}
		if cur < 0 {
			continue
		}
		switch {
		case strings.HasPrefix(line, "new file mode"):
			out[cur].Op = "create"
		case strings.HasPrefix(line, "deleted file mode"):
			out[cur].Op = "delete"
		}
	}
	return out
}

// fileChanged is the event for the wrapper's working-tree diff.
func fileChanged(d *journal.Diff) event.Event {
	files := []string{}
	seen := map[string]bool{}
	for _, f := range parsePatch(d.Patch) {
		if !seen[f.Path] {
			seen[f.Path] = true
			files = append(files, f.Path)
		}
	}
	return event.CustomEvent(event.FileChanged, event.FileChange{Patch: string(d.Patch), Files: files, Truncated: d.Truncated})
}

// fileEvents reads a git patch into file events: create for new files,
// delete for deleted ones, change otherwise.
func fileEvents(patch []byte) []sandbox.FileEvent {
	var out []sandbox.FileEvent
	for _, f := range parsePatch(patch) {
		out = append(out, sandbox.FileEvent{Op: f.Op, Path: sandbox.PortablePath(f.Path)})
	}
	return out
}

// fileHook tells the definition's OnFile hook about each file the run
// changed (once, when the diff is first read); a panicking or slow hook
// cannot stop the run.
func (d *driver) fileHook(diff *journal.Diff) {
	hook := d.def.Hooks.OnFile
	if hook == nil {
		return
	}
	for _, ev := range fileEvents(diff.Patch) {
		func() {
			defer func() {
				if p := recover(); p != nil {
					d.r.log.Warn("run: the OnFile hook panicked", "run", d.run.ID, "panic", p)
				}
			}()
			hook(d.ctx, ev)
		}()
	}
}
