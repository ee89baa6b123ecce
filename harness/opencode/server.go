package opencode

import (
	"context"
	_ "embed"
	"path"
	"strings"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Modes of option "mode".
const (
	// ModeRun runs `opencode run --format json` (the default).
	ModeRun = "run"
	// ModeServer runs serve-client.js, the client of `opencode serve`.
	ModeServer = "server"
)

//go:embed serve-client.js
var serveClient []byte

// clientConfig is the JSON serve-client.js reads (RunDir/serve.json). It
// holds no secret.
type clientConfig struct {
	Executable string       `json:"executable"`
	Args       []string     `json:"args"`
	Model      *clientModel `json:"model,omitempty"`
	Session    string       `json:"session,omitempty"`
	Agent      string       `json:"agent,omitempty"` // the run's mode: the prompt's agent
	Directory  string       `json:"directory,omitempty"`
	Policy     clientPolicy `json:"policy"`
	Live       *clientLive  `json:"live,omitempty"`
	Warm       *clientWarm  `json:"warm,omitempty"` // the thread's kept server, or nil: start one
}

type clientModel struct {
	ProviderID string `json:"providerID"`
	ModelID    string `json:"modelID"`
}

// clientPolicy is OpenCode's ruleset for the run, flattened in order (the
// last matching rule wins), and the decision when none matches.
type clientPolicy struct {
	Default sandbox.Decision `json:"default"`
	Rules   []clientRule     `json:"rules"`
}

type clientRule struct {
	Permission string `json:"permission"`
	Pattern    string `json:"pattern"`
	Action     string `json:"action"`
}

// compileClientPolicy is the policy the client answers permission.asked
// with: the same rules OPENCODE_CONFIG_CONTENT gives OpenCode (no policy
// allows everything).
func compileClientPolicy(p *sandbox.Policy, scripts map[string]string, approvals map[string]bool, root string) clientPolicy {
	cp := clientPolicy{Rules: []clientRule{}}
	p = sandbox.EffectivePolicy(p)
	cp.Default = decisionOr(p.Default, sandbox.Ask)
	for _, perm := range permissionRules(p, scripts, approvals, root) {
		for _, r := range perm.rules {
			cp.Rules = append(cp.Rules, clientRule{Permission: perm.key, Pattern: r.pattern, Action: r.action})
		}
	}
	return cp
}

// prepareServer writes the client and its configuration into RunDir and
// returns the client's command; with warm, the thread's kept server,
// ensured here, serves the turn (when it can).
func prepareServer(ctx context.Context, h sandbox.Handle, req harness.Request, env map[string]string, exe, model string, approvals map[string]bool, wait, poll time.Duration, warm *warmServer) ([]string, error) {
	const op = "harness.opencode"
	ok, err := hasNode(ctx, h, env)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID, "opencode server mode needs node in the sandbox (it runs the server's client); install node or use mode run")
	}
	var kept *clientWarm
	if warm != nil {
		if kept, err = ensureWarm(ctx, h, req, *warm); err != nil {
			return nil, err
		}
	}
	cfg := clientConfig{
		Executable: exe,
		Args:       append([]string{}, req.Args...),
		Directory:  req.WorkspaceRoot,
		Policy:     compileClientPolicy(req.Policy, req.Scripts, approvals, req.WorkspaceRoot),
		Warm:       kept,
	}
	if prov, name, ok := strings.Cut(model, "/"); ok && prov != "" && name != "" {
		cfg.Model = &clientModel{ProviderID: prov, ModelID: name}
	}
	if sessionIDRE.MatchString(req.Session) {
		cfg.Session = req.Session
	}
	cfg.Agent = req.Mode
	if cfg.Live, err = prepareLive(ctx, h, req, wait, poll); err != nil {
		return nil, err
	}
	script, cfgFile := path.Join(req.RunDir, "serve-client.js"), path.Join(req.RunDir, "serve.json")
	if err := harness.WriteFile(ctx, h, script, serveClient, "600"); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if err := harness.WriteFile(ctx, h, cfgFile, []byte(jsonString(cfg)), "600"); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	return []string{"node", script, cfgFile}, nil
}

// hasNode reports whether node runs in the sandbox with env.
func hasNode(ctx context.Context, h sandbox.Handle, env map[string]string) (bool, error) {
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "command -v node >/dev/null 2>&1"}, Env: env})
	if err != nil {
		return false, sandbox.Wrap(sandbox.Internal, "harness.opencode", "node", err)
	}
	return res.ExitCode == 0, nil
}
