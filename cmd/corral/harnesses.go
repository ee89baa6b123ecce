package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/harness/grokbuild"
	"github.com/d10ffeed/corral/harness/opencode"
)

// harnesses are the agents the CLI can run, by name.
var harnesses = map[string]harness.Harness{
	command.Name:    command.Harness{},
	claudecode.Name: claudecode.Harness{},
	grokbuild.Name:  grokbuild.Harness{},
	codex.Name:      codex.Harness{},
	opencode.Name:   opencode.Harness{},
	acp.Name:        acp.New(acp.Options{}),
}

func harnessNames() []string {
	names := make([]string, 0, len(harnesses))
	for n := range harnesses {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// allHarnesses returns every harness, for a runner that may take over any
// run.
func allHarnesses() []harness.Harness {
	out := make([]harness.Harness, 0, len(harnesses))
	for _, n := range harnessNames() {
		out = append(out, harnesses[n])
	}
	return out
}

// resolveHarness reads --harness: a name, or "acp:<agent command>" for any
// ACP agent (the command becomes the run's arguments).
func resolveHarness(name string) (harness.Harness, []string, error) {
	if rest, ok := strings.CutPrefix(name, "acp:"); ok {
		h, ok := harnesses["acp"]
		if !ok {
			return nil, nil, fmt.Errorf("the acp harness is not built into this corral")
		}
		args := strings.Fields(rest)
		if len(args) == 0 {
			return nil, nil, fmt.Errorf(`--harness acp: needs the agent's command, e.g. "acp:my-agent --acp"`)
		}
		return h, args, nil
	}
	h, ok := harnesses[name]
	if !ok {
		return nil, nil, fmt.Errorf("unknown harness %q (known: %s, or acp:<agent command>)", name, strings.Join(harnessNames(), ", "))
	}
	return h, nil, nil
}
