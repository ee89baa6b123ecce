// Package opencode is the harness for OpenCode. It has two modes (option
// "mode"): "run" (the default), `opencode run --format json`, one turn per
// run, its JSON events on stdout (the journal), the prompt on stdin; and
// "server", `opencode serve` driven by a small client inside the sandbox.
//
// # Run mode and server mode
//
// `opencode serve` streams finer events (message.part.delta, and
// permission.asked, which a client answers), but something inside the
// sandbox must be its client and write the journal, since there is no
// corral binary in the sandbox.
//
// Run mode needs nothing but the opencode CLI: `opencode run` is that
// client, built in. It starts the server in-process (no port is opened, so
// there is no server password to set), prints its events to stdout and
// exits when the turn ends. What it costs:
//
//   - text and reasoning arrive as whole parts when they end, not as token
//     deltas; tool calls arrive once they completed or failed;
//   - permission.asked is not printed. `opencode run` rejects every
//     permission that asks, which ends the turn. So the policy is handed to
//     OpenCode's own permission rules (allow, deny, ask), and a tool call
//     that fails with OpenCode's "rejected permission" error is an ask: the
//     translator adds a CUSTOM approval.requested event with a stable
//     sandbox.ApprovalID. A decision given for that id (Request.Approvals)
//     becomes a rule in the thread's next run.
//
// Server mode needs node in the sandbox (without it Prepare fails with
// FailedPrecondition). The harness writes serve-client.js (embedded) and
// its configuration serve.json into RunDir and runs
//
//	node RunDir/serve-client.js RunDir/serve.json
//
// The client starts `opencode serve --port 0 --hostname 127.0.0.1
// [Request.Args...]` with a random OPENCODE_SERVER_PASSWORD it makes itself
// (never in argv, a file or the journal), reads the address the server
// prints, creates the session or resumes Request.Session, subscribes to
// GET /event, sends the prompt (its stdin) with POST
// /session/ID/prompt_async, and writes every server event as one JSON line
// to stdout, after a first line {"type":"corral.client"} that tells the
// translator the journal is server mode's, and a corral.session line. It
// exits 0 when the session goes idle after the prompt, 1 after a session
// error (or when the server, the session or the stream fails: a
// corral.error line), and stops its server on exit; the runner's cancel
// kills the whole process group anyway. What it gives:
//
//   - text and reasoning as live deltas (TEXT_MESSAGE_CONTENT,
//     REASONING_MESSAGE_CONTENT per message.part.delta), tool calls as they
//     start (TOOL_CALL_START, then ARGS once the input is known, the result
//     when done; a call still open at the end gets an interrupted result);
//   - permission.asked answered by the client with the same rules
//     OpenCode gets (serve.json holds them, compiled from the policy and
//     the approvals): allow → reply "once"; deny → "reject" with a message,
//     so the model is told and goes on; ask → "reject" (the turn ends, as in
//     run mode) and a corral.permission line from which the translator
//     emits approval.requested for the call, with the same id as run mode.
//     OpenCode only asks when its own evaluation of those rules says ask,
//     so in practice the client's answer is ask (or the policy's default
//     for a permission the policy has no rule for, such as
//     external_directory).
//
// What it costs: node, a loopback port, the server's start-up (several
// seconds more than run mode), and a client whose protocol (the server's
// HTTP API and event names) may change between OpenCode versions; the
// journal also holds the server's housekeeping events, which the
// translator skips.
//
// With option "warm" the server outlives the run: serve.json's "warm"
// names the thread's kept server (its directory and pid), which the
// client uses instead of starting one and leaves running at its end.
//
// # Command and configuration
//
//	opencode run --format json --thinking [-m MODEL] [-s SESSION] [Request.Args...]
//
// or, in server mode, node RunDir/serve-client.js RunDir/serve.json (the
// model and session go in serve.json). Both modes share everything below.
//
// OPENCODE_CONFIG points at RunDir/opencode.json (autoupdate and sharing
// off; with option "baseURL", a provider "corral" using
// @ai-sdk/openai-compatible whose apiKey is "{env:NAME}"). The policy goes
// in OPENCODE_CONFIG_CONTENT, the config layer OpenCode loads last, so the
// workspace's own opencode.json cannot override a rule of the same
// pattern. No secret is in a file or in argv.
//
// With harness.AuthAPIKey (the default) and "baseURL", the key is the
// workspace secret named by option "apiKeySecret" (default
// OPENAI_API_KEY), given to OpenCode in the environment under that name.
// Without "baseURL" OpenCode reads its providers' usual variables, which
// the sandbox already has from the workspace secrets. With harness.AuthHost
// the provider key variables in ProviderKeyEnv are removed (`env -u`) so
// OpenCode uses its own stored login.
//
// # Workspace projection
//
// Every run projects the workspace's skills and MCP servers into its
// opencode.json; nothing is written into the workspace.
//
//   - Skills: "skills": {"paths": [...]} lists the absolute skill
//     directories harness.FindSkills finds under Request.SkillRoots.
//     OpenCode scans each for **/SKILL.md and lists the skills (frontmatter
//     name and description) in its system prompt, for its skill tool.
//   - MCP servers: "mcp": {NAME: {...}}, checked first with
//     sandbox.ValidateMCPServers. A stdio server is {"type": "local",
//     "command": [command, args...], "environment": env}; an http or sse
//     server is {"type": "remote", "url", "headers"} (OpenCode tries
//     streamable HTTP, then SSE); all are "enabled". OpenCode names their
//     tools SERVER_TOOL.
//   - A header or environment value that names a secret (${secret:NAME})
//     moves whole into a variable CORRAL_MCP_VALUE_<n> of OpenCode's
//     environment and is written as "{env:CORRAL_MCP_VALUE_<n>}". OpenCode
//     pastes {env:...} into the file's JSON text before parsing it, so the
//     variable holds the value JSON-escaped (a quote or backslash would
//     otherwise break the file). No secret is in the file or argv.
//
// The project's own configuration (its opencode.json, .opencode/) loads
// after OPENCODE_CONFIG: a server of the same name there is merged over
// ours, and a skills.paths of its own replaces ours (the workspace's skills
// are then not listed). Its .opencode/skills are found as usual.
//
// Resume passes Request.Session to -s; OpenCode keeps sessions in its data
// directory ($XDG_DATA_HOME/opencode) in the sandbox. A session that is
// gone fails the run ("Session not found"); there is no fresh-session
// fallback yet. Server mode resumes it through the server's API (GET
// /session/ID) and fails the same way.
//
// # Options
//
//   - "executable": the opencode binary (default "opencode" on PATH).
//   - "baseURL": an OpenAI-compatible endpoint (".../v1"), api-key auth.
//   - "apiKeySecret": the secret holding the key for "baseURL".
//   - "mode": "run" (default) or "server" (see above).
//   - "approvalWait" (server mode; a Go duration, default 0: off): a
//     permission the policy asks about waits this long, with the turn, in
//     the client for a live answer (harness.LiveApprover: Runner.Answer
//     appends it to the run's harness.AnswersFile; each line's HMAC is
//     checked with Request.AnswerKey, which the client reads from
//     RunDir/answer.key and unlinks when it starts). The journal shows
//     approval.requested, approval.waiting and approval.answered; an
//     answer replies "once" or rejects with a message (the model goes on
//     in the same turn); at the deadline the policy's default decides (an
//     ask default denies). Lines the key does not authenticate are
//     ignored and reported as opencode.warning. The client runs inside
//     the sandbox under the journal wrapper, so the request outlives the
//     corral process that drives the run.
//   - "answerPoll" (a Go duration, default 250ms): how often a waiting
//     client reads the answers file.
//   - "warm" (server mode; "true" or "false", the default): keep the
//     thread's `opencode serve` running between its runs (harness.Warmer;
//     see warm.go). Prepare starts it, outside any run's journal wrapper,
//     in a per-thread directory beside the journals, and each run's client
//     posts its prompt to that server's session instead of starting one;
//     a dead server, another digest (argv, environment, policy,
//     opencode.json) or a turn that died mid-turn starts a new one that
//     resumes the session; a server busy with another live turn, or a
//     sandbox without setsid, runs cold. Live approvals work on warm
//     turns (the wait is the turn's client's). Cancel kills the server.
//
// The run's mode (Request.Mode) is OpenCode's agent: its built-in "build"
// (the default) and "plan", or one the project defines; `--agent NAME` in
// run mode, the prompt's agent in server mode.
//
// # Policy mapping
//
// OpenCode evaluates its rules last-match-wins per permission, and splits a
// shell command into its simple commands, each checked on its own.
//
//   - bash: "*" → the policy default (unset: ask), then commands.allow →
//     allow, commands.ask → ask, approved commands → allow (refused ones →
//     deny), commands.deny → deny; script names are expanded. Globs mean
//     the same in both ("*" any text), except that OpenCode's "?" matches
//     one character.
//   - edit (edit, write, apply_patch) → fileWrite; webfetch and websearch
//     → network; both fall back to the default.
//   - No policy allows everything: the rules of Policy{Default: allow}
//     (bash, edit, webfetch and websearch "*" allow), as for every
//     harness. Permissions the policy has no gate for (edits outside the
//     workspace, say) keep OpenCode's defaults.
package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the harness's name.
const Name = "opencode"

// Option keys read from Request.Options.
const (
	OptExecutable   = "executable"
	OptBaseURL      = "baseURL"
	OptAPIKeySecret = "apiKeySecret"
	OptMode         = "mode"
)

// DefaultAPIKeySecret is the secret read for "baseURL" by default.
const DefaultAPIKeySecret = "OPENAI_API_KEY"

// ProviderKeyEnv are the provider key variables removed from OpenCode's
// environment with host auth.
var ProviderKeyEnv = []string{
	"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY",
	"OPENROUTER_API_KEY", "XAI_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "MISTRAL_API_KEY",
}

// providerID is the provider "baseURL" defines.
const providerID = "corral"

// Harness runs OpenCode.
type Harness struct{}

var _ harness.Harness = Harness{}

// Name returns "opencode".
func (Harness) Name() string { return Name }

// Translator returns a fresh translator for either mode's journal: one
// that starts with serve-client.js's corral.client line is server mode's.
func (Harness) Translator(run harness.Run) harness.Translator { return newTranslator(run) }

var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// Prepare writes the run's opencode.json and returns the opencode command.
func (Harness) Prepare(ctx context.Context, h sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	const op = "harness.opencode"
	if strings.TrimSpace(req.Prompt) == "" {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "opencode needs a prompt")
	}
	auth := req.Auth
	if auth == "" {
		auth = harness.AuthAPIKey
	}
	if auth != harness.AuthAPIKey && auth != harness.AuthHost {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "unknown auth mode %q", auth)
	}
	if req.RunDir == "" || !path.IsAbs(req.RunDir) {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "no absolute run directory for opencode.json")
	}
	opts := req.Options
	mode := opts[OptMode]
	if mode == "" {
		mode = ModeRun
	}
	if mode != ModeRun && mode != ModeServer {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option mode: want %q or %q, not %q", ModeRun, ModeServer, mode)
	}
	if req.Mode != "" {
		if err := (Harness{}).CheckMode(req.Mode); err != nil {
			return harness.Invocation{}, err
		}
	}
	wait, poll, err := liveOptions(req, mode)
	if err != nil {
		return harness.Invocation{}, err
	}
	warm, err := harness.ParseWarmOption(opts)
	if err != nil || warm && mode != ModeServer {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, OptWarm, "option warm: true or false, and true needs mode=server (not %q with mode %q)", opts[OptWarm], mode)
	}
	approvals := req.Approvals
	env := make(map[string]string, len(req.Env)+4)
	for k, v := range req.Env {
		env[k] = v
	}
	model, name := req.Model, ""
	baseURL := opts[OptBaseURL]
	if baseURL != "" {
		if auth == harness.AuthHost {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option baseURL needs api-key auth (host auth uses opencode's stored login)")
		}
		name = strings.TrimPrefix(model, providerID+"/")
		if name == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option baseURL needs a model name")
		}
		secret := opts[OptAPIKeySecret]
		if secret == "" {
			secret = DefaultAPIKeySecret
		}
		if err := sandbox.ValidateEnvName(secret); err != nil {
			return harness.Invocation{}, err
		}
		key, ok := req.Secrets.Value(secret)
		if !ok || key == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID, "option baseURL needs the workspace secret %s", secret)
		}
		env[secret] = key
		env["OPENCODE_DISABLE_MODELS_FETCH"] = "1" // the provider is ours: no model catalogue needed
		model = providerID + "/" + name
	}
	proj, err := project(ctx, h, req)
	if err != nil {
		return harness.Invocation{}, err
	}
	for k, v := range proj.env {
		env[k] = v
	}
	cfg, cfgJSON := path.Join(req.RunDir, "opencode.json"), configJSON(baseURL, name, opts[OptAPIKeySecret], proj)
	if err := harness.WriteFile(ctx, h, cfg, cfgJSON, "600"); err != nil {
		return harness.Invocation{}, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	env["OPENCODE_CONFIG"] = cfg
	if req.WorkspaceRoot != "" {
		// opencode takes its project directory from PWD before its cwd.
		env["PWD"] = req.WorkspaceRoot
	}
	env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
	env["OPENCODE_DISABLE_LSP_DOWNLOAD"] = "1"
	// No policy allows everything: the same rules as Policy{Default: allow}.
	env["OPENCODE_CONFIG_CONTENT"] = permissionConfig(sandbox.EffectivePolicy(req.Policy), req.Scripts, approvals, req.WorkspaceRoot)

	exe := opts[OptExecutable]
	if exe == "" {
		exe = "opencode"
	}
	if mode == ModeServer {
		var kept *warmServer
		if warm && req.ThreadID != "" {
			kept = &warmServer{exe: exe, auth: auth, env: env, config: cfgJSON}
		}
		args, err := prepareServer(ctx, h, req, env, exe, model, approvals, wait, poll, kept)
		if err != nil {
			return harness.Invocation{}, err
		}
		return finishInvocation(req, auth, args, env)
	}
	args := []string{exe, "run", "--format", "json", "--thinking"}
	if model != "" {
		args = append(args, "-m", model)
	}
	if sessionIDRE.MatchString(req.Session) {
		args = append(args, "-s", req.Session)
	}
	if req.Mode != "" {
		args = append(args, "--agent", req.Mode)
	}
	args = append(args, req.Args...)
	return finishInvocation(req, auth, args, env)
}

// finishInvocation strips the provider keys with host auth and validates
// the command.
func finishInvocation(req harness.Request, auth harness.Auth, args []string, env map[string]string) (harness.Invocation, error) {
	if auth == harness.AuthHost {
		pre := []string{"env"}
		for _, k := range ProviderKeyEnv {
			pre = append(pre, "-u", k)
			delete(env, k)
		}
		args = append(pre, args...)
	}
	cmd := sandbox.Command{Args: args, Env: env}
	if err := cmd.Validate(); err != nil {
		return harness.Invocation{}, err
	}
	return harness.Invocation{Command: cmd, Stdin: []byte(req.Prompt)}, nil
}

// configJSON is the per-run opencode.json. It holds no secret: the key and
// the MCP servers' secret values are referenced as {env:NAME}.
func configJSON(baseURL, model, secret string, proj projection) []byte {
	cfg := map[string]any{"autoupdate": false, "share": "disabled"}
	if len(proj.skillPaths) > 0 {
		cfg["skills"] = map[string]any{"paths": proj.skillPaths}
	}
	if len(proj.mcp) > 0 {
		cfg["mcp"] = proj.mcp
	}
	if baseURL != "" {
		if secret == "" {
			secret = DefaultAPIKeySecret
		}
		cfg["provider"] = map[string]any{providerID: map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "corral",
			"options": map[string]any{"baseURL": baseURL, "apiKey": "{env:" + secret + "}"},
			"models":  map[string]any{model: map[string]any{"name": model}},
		}}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(cfg); err != nil {
		panic("opencode: " + err.Error()) // plain data only
	}
	return b.Bytes()
}

// rules is an ordered pattern → action list; a pattern added again moves
// to the end (OpenCode's last match wins).
type rules []struct{ pattern, action string }

func (r *rules) add(pattern string, action sandbox.Decision) {
	pattern = strings.TrimSpace(pattern)
	if pattern == "" {
		return
	}
	for i, x := range *r {
		if x.pattern == pattern {
			*r = append((*r)[:i], (*r)[i+1:]...)
			break
		}
	}
	*r = append(*r, struct{ pattern, action string }{pattern, string(action)})
}

// json renders the rules as an object with the keys in order, or a plain
// action when "*" is the only rule.
func (r rules) json() string {
	if len(r) == 1 && r[0].pattern == "*" {
		return jsonString(r[0].action)
	}
	var b strings.Builder
	b.WriteString("{")
	for i, x := range r {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(jsonString(x.pattern) + ":" + jsonString(x.action))
	}
	b.WriteString("}")
	return b.String()
}

func decisionOr(d, def sandbox.Decision) sandbox.Decision {
	if d == "" {
		return def
	}
	return d
}

// permission is one OpenCode permission's ordered rules.
type permission struct {
	key   string
	rules rules
}

// permissionConfig is the OPENCODE_CONFIG_CONTENT for a policy: an ordered
// JSON object, since OpenCode's last matching rule wins.
func permissionConfig(p *sandbox.Policy, scripts map[string]string, approvals map[string]bool, root string) string {
	var b strings.Builder
	b.WriteString(`{"permission":{`)
	for i, x := range permissionRules(p, scripts, approvals, root) {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(jsonString(x.key) + ":" + x.rules.json())
	}
	b.WriteString("}}")
	return b.String()
}

// permissionRules maps a policy onto OpenCode's permissions, in the order
// they are written.
func permissionRules(p *sandbox.Policy, scripts map[string]string, approvals map[string]bool, root string) []permission {
	def := decisionOr(p.Default, sandbox.Ask)
	expand := func(pat string) []string {
		out := []string{pat}
		if cmd, ok := scripts[strings.TrimSpace(pat)]; ok {
			out = append(out, cmd)
		}
		return out
	}
	var bash rules
	bash.add("*", def)
	for _, list := range []struct {
		pats []string
		d    sandbox.Decision
	}{{p.Commands.Allow, sandbox.Allow}, {p.Commands.Ask, sandbox.Ask}} {
		for _, pat := range list.pats {
			for _, f := range expand(pat) {
				bash.add(f, list.d)
			}
		}
	}
	edit := rules{}
	edit.add("*", p.Capability("fileWrite"))
	network := rules{}
	network.add("*", p.Capability("network"))
	tools := map[string]sandbox.Decision{}
	for _, id := range sortedKeys(approvals) {
		kind, target, ok := parseApprovalID(id)
		if !ok || strings.ContainsAny(target, "*?") {
			continue
		}
		d := sandbox.Deny
		if approvals[id] {
			d = sandbox.Allow
		}
		switch kind {
		case sandbox.ApproveCommand:
			for _, c := range commandForms(target) {
				bash.add(c, d)
			}
		case sandbox.ApproveFileWrite:
			if rel, ok := relativeTo(root, target); ok {
				edit.add(rel, d)
			}
		case sandbox.ApproveNetwork:
			network.add(target, d)
		case sandbox.ApproveTool:
			// A whole tool: its "*" rule moves last (deny rules still follow).
			switch k := permissionKey(target); k {
			case "bash":
				bash.add("*", d)
			case "edit":
				edit.add("*", d)
			case "webfetch", "websearch":
				network.add("*", d)
			default:
				tools[k] = d
			}
		}
	}
	for _, pat := range p.Commands.Deny {
		for _, f := range expand(pat) {
			bash.add(f, sandbox.Deny)
		}
	}
	out := []permission{{"bash", bash}, {"edit", edit}, {"webfetch", network}, {"websearch", network}}
	for _, k := range sortedKeys(tools) {
		r := rules{}
		r.add("*", tools[k])
		out = append(out, permission{k, r})
	}
	return out
}

// parseApprovalID splits an id this harness minted.
func parseApprovalID(id string) (sandbox.ApprovalKind, string, bool) {
	rest, ok := strings.CutPrefix(id, Name+":")
	if !ok {
		return "", "", false
	}
	kind, target, ok := strings.Cut(rest, ":")
	if !ok || target == "" {
		return "", "", false
	}
	return sandbox.ApprovalKind(kind), target, true
}

// commandForms is an approved command and its simple commands (split on
// &&, ||, ; and |), since OpenCode checks each simple command on its own.
func commandForms(cmd string) []string {
	out := []string{cmd}
	parts := []string{cmd}
	for _, sep := range []string{"&&", "||", ";", "|"} {
		var next []string
		for _, p := range parts {
			next = append(next, strings.Split(p, sep)...)
		}
		parts = next
	}
	if len(parts) > 1 {
		for _, p := range parts {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// relativeTo returns target relative to root (OpenCode's edit patterns
// are relative to the worktree).
func relativeTo(root, target string) (string, bool) {
	if !path.IsAbs(target) {
		return path.Clean(target), true
	}
	if root == "" {
		return "", false
	}
	rel, ok := strings.CutPrefix(path.Clean(target), path.Clean(root)+"/")
	return rel, ok && rel != ""
}

// permissionKey is the OpenCode permission that guards a tool.
func permissionKey(tool string) string {
	switch tool {
	case "edit", "write", "apply_patch", "patch", "multiedit":
		return "edit"
	}
	return tool
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// jsonString encodes plain data as JSON, without HTML escaping.
func jsonString(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("opencode: " + err.Error()) // plain data only
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// InstallHint says how to install the OpenCode CLI in an image.
func (Harness) InstallHint() string {
	return "the opencode CLI is not installed in the sandbox: add it to the image (npm install -g opencode-ai), or point --option executable=PATH at it"
}
