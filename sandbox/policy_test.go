package sandbox_test

import (
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestEvaluateCommand(t *testing.T) {
	p := &sandbox.Policy{Commands: sandbox.CommandRules{
		Allow: []string{"git status", "go test *", "test"},
		Ask:   []string{"git push *"},
		Deny:  []string{"rm -rf *", "go test ./secret/*"},
	}}
	scripts := map[string]string{"test": "npm test", "lint": "npm run lint"}
	for _, tt := range []struct {
		cmd  string
		want sandbox.Decision
	}{
		{"git status", sandbox.Allow},
		{"  git status  ", sandbox.Allow},
		{"git status --short", sandbox.Ask}, // anchored: falls to the default
		{"go test ./...", sandbox.Allow},
		{"go test ./secret/x", sandbox.Deny}, // deny beats allow
		{"git push origin main", sandbox.Ask},
		{"rm -rf /", sandbox.Deny},
		{"confirm -rf safe", sandbox.Ask}, // rm -rf * is anchored
		{"echo hi && rm -rf /", sandbox.Ask},
		{"npm test", sandbox.Allow}, // a script alias: "test" names it
		{"test", sandbox.Allow},
		{"go test ./a\nrm -rf /", sandbox.Ask}, // * does not cross a newline
		{"ls", sandbox.Ask},
	} {
		if got := p.EvaluateCommand(tt.cmd, scripts); got != tt.want {
			t.Errorf("EvaluateCommand(%q) = %s, want %s", tt.cmd, got, tt.want)
		}
	}
	var none *sandbox.Policy
	if got := none.EvaluateCommand("anything", nil); got != sandbox.Allow {
		t.Errorf("no policy: %s, want allow", got)
	}
	if got := (&sandbox.Policy{}).EvaluateCommand("anything", nil); got != sandbox.Ask {
		t.Errorf("an empty policy: %s, want ask", got)
	}
	if got := (&sandbox.Policy{Default: sandbox.Allow}).EvaluateCommand("x", nil); got != sandbox.Allow {
		t.Errorf("default allow: %s", got)
	}
	// A pattern naming a script's command matches the script name.
	q := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"npm run lint"}}}
	if got := q.EvaluateCommand("lint", scripts); got != sandbox.Deny {
		t.Errorf("alias both ways: %s", got)
	}
}

func TestResolveApprovals(t *testing.T) {
	p := &sandbox.Policy{Commands: sandbox.CommandRules{Allow: []string{"ls"}, Deny: []string{"rm *"}}, FileWrite: sandbox.Ask, Network: sandbox.Deny}
	req := sandbox.ApprovalRequest{Provider: "docker", Kind: sandbox.ApproveCommand, Target: "make deploy"}
	r := p.Resolve(req, nil, nil)
	if r.ID != "docker:command:make deploy" || r.Decision != sandbox.Deny || !r.NeedsApproval {
		t.Errorf("ask without a decision = %+v", r)
	}
	if r2 := p.Resolve(req, nil, nil); r2.ID != r.ID {
		t.Error("approval ids must be stable")
	}
	if r := p.Resolve(req, nil, map[string]bool{r.ID: true}); r.Decision != sandbox.Allow || r.NeedsApproval {
		t.Errorf("approved = %+v", r)
	}
	if r := p.Resolve(req, nil, map[string]bool{r.ID: false}); r.Decision != sandbox.Deny || r.NeedsApproval {
		t.Errorf("refused = %+v", r)
	}
	if r := p.Resolve(sandbox.ApprovalRequest{Provider: "docker", Kind: sandbox.ApproveCommand, Target: "rm x"}, nil, map[string]bool{"docker:command:rm x": true}); r.Decision != sandbox.Deny {
		t.Errorf("deny is final, even against a decision: %+v", r)
	}
	if r := p.Resolve(sandbox.ApprovalRequest{Kind: sandbox.ApproveNetwork, Target: "example.com"}, nil, nil); r.Decision != sandbox.Deny || r.NeedsApproval {
		t.Errorf("network deny = %+v", r)
	}
	if r := p.Resolve(sandbox.ApprovalRequest{Kind: sandbox.ApproveFileWrite, Target: "a.txt"}, nil, nil); !r.NeedsApproval {
		t.Errorf("fileWrite ask = %+v", r)
	}
	if p.NetworkMode() != sandbox.NetworkDeny {
		t.Error("a network deny is handed to the provider")
	}
}

func TestParseEgressEntry(t *testing.T) {
	for _, c := range []struct {
		in, host string
		port     int
		ip       bool
	}{
		{"API.anthropic.com", "api.anthropic.com", 0, false},
		{"*.npmjs.org:443", "*.npmjs.org", 443, false},
		{"10.1.2.3", "10.1.2.3", 0, true},
		{"10.1.2.3:5432", "10.1.2.3", 5432, true},
		{"[2001:db8::1]:443", "2001:db8::1", 443, true},
		{"2001:db8::1", "2001:db8::1", 0, true},
	} {
		got := sandbox.ParseEgressEntry(c.in)
		if got.Host != c.host || got.Port != c.port || got.IP.IsValid() != c.ip {
			t.Errorf("%s: %+v", c.in, got)
		}
	}
}
