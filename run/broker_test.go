package run_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// TestBrokeredSecretsNeedABroker: a runner without an egress gateway
// refuses to start a run whose definition has brokered secrets, rather
// than give the agent nothing (or the value).
func TestBrokeredSecretsNeedABroker(t *testing.T) {
	e := newEnv(t)
	secrets, _ := sandbox.NewSecrets(map[string]string{"K": "v"})
	secrets, err := secrets.WithBrokers(map[string]sandbox.Broker{"K": {Hosts: []string{"a.example"}, Header: "bearer"}})
	if err != nil {
		t.Fatal(err)
	}
	e.def.Workspace = &sandbox.Workspace{Secrets: secrets}
	r := e.runner(t, run.Options{})
	_, err = r.Start(ctx(t), run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"true"}})
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "egress gateway") {
		t.Fatalf("start: %v, want FailedPrecondition naming the gateway", err)
	}
}
