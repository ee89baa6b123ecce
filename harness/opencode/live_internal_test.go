package opencode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// TestPrepareLiveOptions: approvalWait needs server mode and a duration;
// in server mode the client's configuration carries the wait and the key
// file (the key itself never in argv or the configuration).
func TestPrepareLiveOptions(t *testing.T) {
	h, ctx := newHandle(t)
	for _, c := range []struct {
		name     string
		opts     map[string]string
		wantCode sandbox.Code
	}{
		{"run mode refuses a wait", map[string]string{OptApprovalWait: "1m"}, sandbox.InvalidArgument},
		{"not a duration", map[string]string{OptMode: ModeServer, OptApprovalWait: "soon"}, sandbox.InvalidArgument},
		{"negative", map[string]string{OptMode: ModeServer, OptApprovalWait: "-1s"}, sandbox.InvalidArgument},
		{"bad poll", map[string]string{OptMode: ModeServer, OptApprovalWait: "1m", OptAnswerPoll: "0s"}, sandbox.InvalidArgument},
		{"run mode, no wait", map[string]string{OptApprovalWait: "0"}, sandbox.OK},
		{"server mode", map[string]string{OptMode: ModeServer, OptApprovalWait: "90s", OptAnswerPoll: "20ms"}, sandbox.OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			req.AnswerKey = []byte("0123456789abcdef0123456789abcdef")
			for k, v := range c.opts {
				req.Options[k] = v
			}
			inv, err := Harness{}.Prepare(ctx, h, req)
			if sandbox.CodeOf(err) != c.wantCode {
				t.Fatalf("Prepare: %v, want code %q", err, c.wantCode)
			}
			if err != nil || c.opts[OptMode] != ModeServer {
				return
			}
			b, err := os.ReadFile(filepath.Join(req.RunDir, "serve.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cfg clientConfig
			if err := json.Unmarshal(b, &cfg); err != nil {
				t.Fatal(err)
			}
			if cfg.Live == nil || cfg.Live.Wait != 90000 || cfg.Live.WaitText != "1m30s" || cfg.Live.Poll != 20 ||
				cfg.Live.Answers != filepath.Join(req.RunDir, "answers.ndjson") || cfg.Live.KeyFile != filepath.Join(req.RunDir, "answer.key") {
				t.Errorf("live configuration %+v", cfg.Live)
			}
			key, _ := os.ReadFile(cfg.Live.KeyFile)
			if string(key) != "30313233343536373839616263646566"+"30313233343536373839616263646566" {
				t.Errorf("key file holds %q", key)
			}
			for _, a := range inv.Command.Args {
				if a == string(key) || a == string(req.AnswerKey) {
					t.Error("the answer key is in argv")
				}
			}
		})
	}
}
