package gateway_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/provider/vercel/vercelfake"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// TestEgressNativeRulesAtStart: on a provider with native egress rules
// (Vercel, over its fake) a run under an allow-list gets the list as the
// sandbox's networkPolicy and no proxy for its agent, and a list the
// rules cannot say (a port) is refused at start, before any sandbox.
func TestEgressNativeRulesAtStart(t *testing.T) {
	const token = "vcl-native-egress"
	f, err := vercelfake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	p, err := vercel.New(vercel.Options{Token: token, TeamID: vercelfake.Team, ProjectID: vercelfake.Project, APIURL: f.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "v", Provider: p, Policy: &sandbox.Policy{Egress: []string{"api.anthropic.com", "*.npmjs.org"}, Default: sandbox.Allow}}
	k := newKit(t, def, nil)
	_, text := k.complete(t, run.StartRequest{Definition: "v", Thread: "th-native", Harness: command.Name,
		Args: []string{"sh", "-c", `echo "proxy=${HTTPS_PROXY:-none}"`}})
	if !strings.Contains(text, "proxy=none") {
		t.Errorf("the agent was given a proxy on a provider with native rules:\n%s", text)
	}
	names := f.Names()
	if len(names) != 1 {
		t.Fatalf("sandboxes %v", names)
	}
	if np, _ := f.NetworkPolicy(names[0]); string(np) != `{"mode":"custom","allowedDomains":["api.anthropic.com","*.npmjs.org"]}` {
		t.Errorf("the sandbox's network policy: %s", np)
	}
	def.Policy.Egress = []string{"api.anthropic.com:443"}
	_, err = k.r.Start(ctxT(t), run.StartRequest{Definition: "v", Thread: "th-native-port", Harness: command.Name, Args: []string{"true"}})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "without ports") {
		t.Errorf("a list entry with a port: %v, want FailedPrecondition", err)
	}
	if got := f.Names(); len(got) != 1 {
		t.Errorf("the refused run made a sandbox: %v", got)
	}
}
