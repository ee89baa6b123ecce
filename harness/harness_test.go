package harness_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/sandbox"
)

type needy struct{ command.Harness }

func (needy) Requires() []string { return []string{"writableStdin", "ports"} }

func TestCheckRequirements(t *testing.T) {
	if err := harness.CheckRequirements(command.Harness{}, sandbox.Capabilities{}); err != nil {
		t.Errorf("a harness without requirements: %v", err)
	}
	err := harness.CheckRequirements(needy{}, sandbox.Capabilities{WritableStdin: true})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "ports") || strings.Contains(err.Error(), "writableStdin") {
		t.Errorf("got %v, want FailedPrecondition naming ports only", err)
	}
	if err := harness.CheckRequirements(needy{}, sandbox.Capabilities{WritableStdin: true, Ports: true}); err != nil {
		t.Errorf("all present: %v", err)
	}
}
