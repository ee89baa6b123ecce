package opencode

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/harnesstest"
	"github.com/d10ffeed/corral/sandbox"
)

func TestPrepareServer(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Session = "ses_dd96551a5ffeLr5hHVZnjRp2c0"
	req.Args = []string{"--log-level", "WARN"}
	req.Policy = &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Ask: []string{"echo *"}, Deny: []string{"rm *"}}}
	req.Options[OptExecutable] = "/opt/opencode"
	req.Options[OptMode] = ModeServer
	req.Approvals = map[string]bool{"opencode:command:make deploy": true}
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	script, cfgFile := filepath.Join(req.RunDir, "serve-client.js"), filepath.Join(req.RunDir, "serve.json")
	if want := []string{"node", script, cfgFile}; !slices.Equal(inv.Command.Args, want) {
		t.Errorf("argv\n got %q\nwant %q", inv.Command.Args, want)
	}
	if string(inv.Stdin) != req.Prompt {
		t.Error("the prompt is not on stdin")
	}
	env := inv.Command.Env
	if env["OPENCODE_CONFIG"] != filepath.Join(req.RunDir, "opencode.json") || env["OPENAI_API_KEY"] != testKey || env["PWD"] != "/srv/ws" {
		t.Errorf("env not shared with run mode: OPENCODE_CONFIG=%q PWD=%q", env["OPENCODE_CONFIG"], env["PWD"])
	}
	if env["OPENCODE_CONFIG_CONTENT"] != permissionConfig(req.Policy, nil, map[string]bool{"opencode:command:make deploy": true}, "/srv/ws") {
		t.Errorf("OPENCODE_CONFIG_CONTENT %s", env["OPENCODE_CONFIG_CONTENT"])
	}
	for k := range env {
		if strings.Contains(k, "PASSWORD") {
			t.Errorf("the environment sets %s: the client makes the server password itself", k)
		}
	}
	got, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, serveClient) {
		t.Error("serve-client.js differs from the embedded client")
	}
	raw, err := os.ReadFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg clientConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Executable != "/opt/opencode" || !slices.Equal(cfg.Args, req.Args) || cfg.Session != req.Session || cfg.Directory != "/srv/ws" ||
		cfg.Model == nil || *cfg.Model != (clientModel{ProviderID: "corral", ModelID: "fake-model"}) {
		t.Errorf("client config %s", raw)
	}
	// The client's rules are OpenCode's, in order: bash "*" allow, the ask,
	// the approval, the deny last.
	var bash []string
	for _, r := range cfg.Policy.Rules {
		if r.Permission == "bash" {
			bash = append(bash, r.Pattern+"="+r.Action)
		}
	}
	if want := []string{"*=allow", "echo *=ask", "make deploy=allow", "rm *=deny"}; cfg.Policy.Default != sandbox.Allow || !slices.Equal(bash, want) {
		t.Errorf("client policy default %q bash rules %q, want %q", cfg.Policy.Default, bash, want)
	}
	// No secret in argv or in any file of the run directory.
	if strings.Contains(strings.Join(inv.Command.Args, " "), testKey) {
		t.Error("the key is in argv")
	}
	_ = filepath.WalkDir(req.RunDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(testKey)) {
				t.Errorf("the key is in %s", p)
			}
		}
		return nil
	})
	// The client keeps the password out of argv and stdout.
	js := string(serveClient)
	for _, want := range []string{"OPENCODE_SERVER_PASSWORD: password", "crypto.randomBytes"} {
		if !strings.Contains(js, want) {
			t.Errorf("serve-client.js lacks %q", want)
		}
	}
}

func TestPrepareServerNoPolicyHostAuth(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Auth = harness.AuthHost
	delete(req.Options, OptBaseURL)
	req.Model = ""
	req.Options[OptMode] = ModeServer
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	args := inv.Command.Args
	if args[0] != "env" || !slices.Contains(args, "OPENAI_API_KEY") || args[len(args)-3] != "node" {
		t.Errorf("argv %q", args)
	}
	var cfg clientConfig
	raw, _ := os.ReadFile(filepath.Join(req.RunDir, "serve.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	// No policy allows everything, as Policy{Default: allow} does.
	if cfg.Model != nil || cfg.Session != "" || cfg.Policy.Default != sandbox.Allow || len(cfg.Policy.Rules) != 4 {
		t.Errorf("client config %s", raw)
	}
}

func TestPrepareServerErrors(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Options[OptMode] = "daemon"
	if _, err := (Harness{}).Prepare(ctx, h, req); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("unknown mode: %v", err)
	}
	req = baseRequest(t)
	req.Options[OptMode] = ModeServer
	req.Env = map[string]string{"PATH": t.TempDir()}
	_, err := Harness{}.Prepare(ctx, h, req)
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "node") {
		t.Errorf("without node: %v, want FailedPrecondition naming node", err)
	}
}

// TestPrepareWarmOptions: warm needs server mode and a boolean; Warm
// (harness.Warmer) is true only for warm=true in server mode.
func TestPrepareWarmOptions(t *testing.T) {
	h, ctx := newHandle(t)
	for _, c := range []struct {
		name string
		opts map[string]string
		warm bool
		bad  bool
	}{
		{"server, warm", map[string]string{OptMode: ModeServer, OptWarm: "true"}, true, false},
		{"server, cold", map[string]string{OptMode: ModeServer, OptWarm: "false"}, false, false},
		{"run mode, warm", map[string]string{OptWarm: "true"}, false, true},
		{"not a boolean", map[string]string{OptMode: ModeServer, OptWarm: "maybe"}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := (Harness{}).Warm(c.opts); got != c.warm {
				t.Errorf("Warm = %v, want %v", got, c.warm)
			}
			if !c.bad {
				return
			}
			req := baseRequest(t)
			for k, v := range c.opts {
				req.Options[k] = v
			}
			if _, err := (Harness{}).Prepare(ctx, h, req); sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "warm") {
				t.Errorf("Prepare: %v, want InvalidArgument naming warm", err)
			}
		})
	}
}

func TestServerTranslatorEdges(t *testing.T) {
	journal := strings.Join([]string{
		`{"type":"corral.client","properties":{"mode":"server","version":1}}`,
		`{"type":"corral.session","properties":{"sessionID":"ses_a"}}`,
		`{"type":"message.updated","properties":{"sessionID":"ses_a","info":{"id":"msg_u","role":"user"}}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_a","part":{"id":"prt_u","messageID":"msg_u","type":"text","text":"the prompt","time":{"start":1,"end":2}}}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_b","part":{"id":"prt_x","messageID":"msg_x","type":"text","text":"a subagent","time":{"start":1,"end":2}}}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_a","part":{"id":"prt_r","messageID":"msg_a","type":"reasoning","text":""}}}`,
		`{"type":"message.part.delta","properties":{"sessionID":"ses_a","messageID":"msg_a","partID":"prt_r","field":"text","delta":"hmm"}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_a","part":{"id":"prt_t","messageID":"msg_a","type":"text","text":""}}}`,
		`{"type":"message.part.delta","properties":{"sessionID":"ses_a","messageID":"msg_a","partID":"prt_t","field":"text","delta":"Hel"}}`,
		`{"type":"message.part.delta","properties":{"sessionID":"ses_a","messageID":"msg_a","partID":"prt_t","field":"text","delta":"lo"}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_a","part":{"id":"prt_t","messageID":"msg_a","type":"text","text":"Hello world","time":{"start":1,"end":2}}}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_a","part":{"id":"prt_c","messageID":"msg_a","type":"tool","callID":"call_1","tool":"bash","state":{"status":"running","input":{"command":"make deploy"}}}}}`,
		`{"type":"permission.asked","properties":{"id":"per_1","sessionID":"ses_a","permission":"bash","patterns":["make deploy"],"tool":{"messageID":"msg_a","callID":"call_1"}}}`,
		`{"type":"corral.permission","properties":{"id":"per_1","permission":"bash","patterns":["make deploy"],"tool":{"callID":"call_1"},"decision":"ask"}}`,
		`{"type":"corral.permission","properties":{"id":"per_2","permission":"external_directory","decision":"ask"}}`,
		`{"type":"corral.permission","properties":{"id":"per_3","permission":"bash","decision":"deny"}}`,
		`{"type":"message.part.updated","properties":{"sessionID":"ses_a","part":{"id":"prt_d","messageID":"msg_a","type":"tool","callID":"call_2","tool":"bash","state":{"status":"pending","input":{}}}}}`,
		`{"type":"session.error","properties":{"sessionID":"ses_a","error":{"name":"APIError","data":{"message":"boom"}}}}`,
		`not json`,
	}, "\n")
	evs := translate([]byte(journal), 1)
	harnesstest.Invariants(t, evs)
	var text, reasoning string
	var approvals []string
	interruptedResults := 0
	for _, e := range evs {
		switch {
		case e.Type == event.TextMessageContent:
			text += e.Delta
		case e.Type == event.ReasoningContent:
			reasoning += e.Delta
		case e.Type == event.Custom && e.Name == event.ApprovalRequested:
			var a event.Approval
			_ = json.Unmarshal(e.Value, &a)
			approvals = append(approvals, a.ID)
		case e.Type == event.ToolCallResult && e.Content == interrupted:
			interruptedResults++
		}
	}
	if text != "Hello world" || reasoning != "hmm" {
		t.Errorf("text %q reasoning %q", text, reasoning)
	}
	want := []string{sandbox.ApprovalID(Name, sandbox.ApproveCommand, "make deploy"), sandbox.ApprovalID(Name, sandbox.ApproveTool, "external_directory")}
	if !slices.Equal(approvals, want) {
		t.Errorf("approvals %q, want %q", approvals, want)
	}
	if interruptedResults != 2 {
		t.Errorf("%d interrupted results, want 2", interruptedResults)
	}
	if last := evs[len(evs)-1]; last.Type != event.RunError || last.Message != "boom" {
		t.Errorf("last %s %q", last.Type, last.Message)
	}
}
