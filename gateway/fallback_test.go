package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// TestBrokerFallback: where the sandboxes' provider cannot reach the
// gateway, a brokered secret refuses the run by default, and with
// broker.fallback env reaches the agent as its value, said at start by a
// policy.unenforced rule.
func TestBrokerFallback(t *testing.T) {
	for _, tt := range []struct {
		fallback string
		want     store.RunStatus
	}{
		{"", store.RunFailed},
		{sandbox.BrokerFallbackEnv, store.RunCompleted},
	} {
		t.Run("fallback="+tt.fallback, func(t *testing.T) {
			value := canary()
			p, err := local.New(local.Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			secrets, _ := sandbox.NewSecrets(map[string]string{"K": value})
			secrets, err = secrets.WithBrokers(map[string]sandbox.Broker{"K": {Hosts: []string{"api.example.test"}, Header: "x-api-key", Fallback: tt.fallback}})
			if err != nil {
				t.Fatal(err)
			}
			def := &sandbox.Definition{ID: "f", Provider: p, Workspace: &sandbox.Workspace{Secrets: secrets}}
			k := newKit(t, def, map[string]string{"local": ""})
			ctx := ctxT(t)
			rec, err := k.r.Start(ctx, run.StartRequest{Definition: "f", Harness: command.Name, Args: []string{"sh", "-c", `printf %s "$K" | sha256sum`}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k.r.Ensure().Destroy(ctxT(t), k.def, ensureReq(rec)) })
			_ = k.r.Wait(ctx, rec.ID)
			got, _, _ := k.st.GetRun(ctx, rec.ID)
			if got.Status != tt.want {
				t.Fatalf("run %s (%s), want %s", got.Status, got.Error, tt.want)
			}
			if tt.fallback == "" {
				if !strings.Contains(got.Error, "cannot reach corral's egress gateway") {
					t.Errorf("error %q does not say why", got.Error)
				}
				return
			}
			sum := sha256.Sum256([]byte(value))
			if text := runText(t, k, rec.ID); !strings.Contains(text, hex.EncodeToString(sum[:])) {
				t.Errorf("the agent did not get the value:\n%s", text)
			}
			evs, _ := k.st.ReadEvents(ctx, rec.ID, 0, 0)
			noticed := false
			for _, e := range evs {
				ev, _ := event.Unmarshal(e.Data)
				var n event.PolicyNotice
				if ev.Name == event.PolicyUnenforced && json.Unmarshal(ev.Value, &n) == nil && len(n.Rules) == 1 && n.Rules[0].Rule == "secrets.K.broker" {
					noticed = true
				}
			}
			if !noticed {
				t.Error("no policy.unenforced notice of the fallback")
			}
		})
	}
}
