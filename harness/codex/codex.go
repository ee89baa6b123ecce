// Package codex is the harness for OpenAI's Codex CLI, run as
// `codex exec --json`: one turn per run, its JSONL events on stdout (the
// journal), the prompt on stdin.
//
// # Command
//
//	codex exec --json --skip-git-repo-check -s MODE -c approval_policy="never"
//	      [-c sandbox_workspace_write.network_access=BOOL] [-m MODEL]
//	      [-c model_reasoning_effort="E"] [-c mcp_servers.NAME.KEY=VALUE...]
//	      [Request.Args...] [resume ID] -
//
// The mcp_servers overrides come with host auth only (see below).
//
// The trailing "-" makes codex read the prompt from stdin; the prompt is
// never in argv. Resume uses Request.Session (the thread id of the thread's
// previous codex run, from its session.started event) when that session's
// rollout file is still in the sandbox; otherwise the run starts a fresh
// codex thread.
//
// # Auth and configuration
//
// With harness.AuthAPIKey (the default) the key comes from the workspace
// secret OPENAI_API_KEY, or else CODEX_API_KEY, and reaches codex only
// through its environment (CODEX_API_KEY). CODEX_HOME is a per-run
// directory under Request.RunDir holding config.toml (no secret in it),
// the workspace's skills (links in skills/) and, when the policy has
// command rules, rules/corral.rules. Its sessions directory is a link to a
// directory that outlives the run (option "sessionsDir", default
// $HOME/.corral/codex/sessions in the sandbox), so the next run can resume
// the thread.
//
// With harness.AuthHost codex uses its own login (CODEX_HOME untouched, by
// default ~/.codex) and runs under `env -u OPENAI_API_KEY -u CODEX_API_KEY`
// so no key in the environment overrides that login.
//
// # Workspace projection: skills and MCP servers
//
// Every run gets the workspace's skills and MCP servers (Request.SkillRoots
// and Request.MCPServers), for that run only.
//
// Skills: with api-key auth, each skill directory found under the skill
// roots (harness.FindSkills) is linked into the per-run CODEX_HOME/skills,
// where codex reads a user's skills; the model sees its name, description
// and path. With host auth skills are NOT projected: codex reads skills
// only from CODEX_HOME/skills, ~/.agents/skills and the repository's
// .agents/skills, the first two are the user's own and the third is in the
// workspace, and codex 0.171 has no setting that adds a skill directory
// for one run (skills.config only toggles skills it found).
//
// MCP servers, both auth modes: [mcp_servers.NAME] tables, in the per-run
// config.toml with api-key auth, as `-c mcp_servers.NAME.KEY=VALUE`
// overrides with host auth (merged over the user's own configuration; a
// server of the same name there keeps the keys corral does not set).
// Neither carries a secret value:
//
//   - stdio: command, args, literal env values in env; an env value that
//     names a secret is set, under the same name, in codex's own
//     environment and listed in env_vars, which codex forwards to the
//     server (it passes servers no other variable of its own). Two
//     servers needing one name with different values, a name that differs
//     from the run's Env, or CODEX_HOME, CODEX_API_KEY or OPENAI_API_KEY
//     is InvalidArgument.
//   - http: url, literal headers in http_headers; a header value that
//     names a secret goes, expanded, into a fresh variable
//     (CORRAL_MCP_VALUE_0, ...) named in env_http_headers.
//   - sse: FailedPrecondition, naming the server: codex speaks only stdio
//     and streamable http.
//
// Servers are validated first (sandbox.ValidateMCPServers:
// InvalidArgument, never quoting a secret value). codex namespaces a
// server's tools as mcp__NAME.
//
// Tool calls: codex runs with approval_policy "never", under which it
// refuses every MCP tool call ("MCP tool call requires approval") unless
// the server's default_tools_approval_mode is "approve". A server whose
// tools the policy allows (no policy, a default of allow, or an answer for
// approval id "codex:tool:mcp__NAME" in Request.Approvals) gets it;
// calls to any other server are refused by codex itself (an error result).
// When the policy asks (default ask, no answer yet), the harness writes a
// corral.mcp_ask line naming those servers before codex starts, and a
// refused call then also raises approval.requested with that id, once per
// server; answering it opens the server's tools in the thread's next run.
//
// # Options
//
//   - "executable": the codex binary (default "codex" on PATH).
//   - "baseURL": an OpenAI Responses-compatible endpoint (".../v1"); codex
//     gets a model provider "corral" with that base_url (api-key auth only).
//   - "sandbox": codex's sandbox mode when the policy lets the agent write
//     (default "workspace-write"; "danger-full-access" where codex's own
//     sandbox cannot run, e.g. without user namespaces).
//   - "sessionsDir": where codex keeps its sessions across runs (api-key).
//   - "reasoningEffort": model_reasoning_effort.
//   - "warm": "true" keeps one `codex app-server` per thread running in
//     the sandbox between the thread's runs and hands it each next turn
//     (api-key auth; see warm.go); default "false".
//   - "policy": "strict" (default) refuses to start when the policy has a
//     rule codex cannot enforce; "best-effort" starts anyway.
//   - "home": where the per-run CODEX_HOME lives (api-key). "auto"
//     (default): in Request.RunDir, except when the sandbox has bubblewrap:
//     codex's bwrap sandbox mounts a fresh /tmp, hiding the helper links
//     codex keeps under CODEX_HOME/tmp (every command then fails with
//     "bwrap: execvp codex-linux-sandbox"), so CODEX_HOME goes to
//     $HOME/.corral/codex/runs/<run> (else /var/tmp/corral-codex-runs/<run>)
//     and is removed after the run (it holds no secret). "run": always in
//     Request.RunDir.
//
// # Policy mapping
//
//   - fileWrite (else default) deny or ask → sandbox read-only; allow or
//     unset → workspace-write (or the "sandbox" option). codex exec cannot
//     ask, so ask denies.
//   - network (else default) allow → network_access=true; deny or ask →
//     false; unset → codex's default (off).
//   - No policy allows everything (Policy{Default: allow}): the sandbox
//     option's mode and network_access=true.
//   - approval_policy is always "never": codex exec has nobody to ask.
//   - commands.deny and commands.ask (script names expanded) → execpolicy
//     prefix rules with decision "forbidden" in CODEX_HOME/rules. A pattern
//     becomes a rule when it is plain words optionally ending in a lone
//     "*"; the rule matches every command starting with those words (for
//     "make deploy" also "make deploy --force": stricter than the glob).
//     commands.allow needs no rule (the sandbox decides).
//
// What codex cannot express, reported by Prepare (an error in strict mode):
// a deny or ask pattern with "*" other than at the end, quotes or shell
// operators; an explicit default of deny or ask (codex cannot confine
// commands to an allow-list); and, with host auth, any command rule (the
// rules file lives in CODEX_HOME, which host auth must not replace). A
// command codex refuses under a rule does not appear in its JSON stream at
// all (the model sees the refusal), so no approval.requested event can be
// raised for it.
package codex

import (
	"bytes"
	"context"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the harness's name.
const Name = "codex"

// Option keys read from Request.Options.
const (
	OptExecutable      = "executable"
	OptBaseURL         = "baseURL"
	OptSandbox         = "sandbox"
	OptSessionsDir     = "sessionsDir"
	OptReasoningEffort = "reasoningEffort"
	OptPolicy          = "policy"
	OptHome            = "home"
)

// Sandbox modes of codex.
const (
	SandboxReadOnly       = "read-only"
	SandboxWorkspaceWrite = "workspace-write"
	SandboxFullAccess     = "danger-full-access"
)

// KeySecrets are the workspace secrets read for the API key, in order.
var KeySecrets = []string{"OPENAI_API_KEY", "CODEX_API_KEY"}

// Harness runs Codex.
type Harness struct{}

var _ harness.Harness = Harness{}

// Name returns "codex".
func (Harness) Name() string { return Name }

// Translator returns a fresh translator for codex's JSONL events.
func (Harness) Translator(run harness.Run) harness.Translator { return newTranslator(run) }

var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// Prepare writes the run's CODEX_HOME (api-key auth) and returns the codex
// command.
func (Harness) Prepare(ctx context.Context, h sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	const op = "harness.codex"
	if strings.TrimSpace(req.Prompt) == "" {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "codex needs a prompt")
	}
	auth := req.Auth
	if auth == "" {
		auth = harness.AuthAPIKey
	}
	if auth != harness.AuthAPIKey && auth != harness.AuthHost {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "unknown auth mode %q", auth)
	}
	opts := req.Options
	strict := true
	switch opts[OptPolicy] {
	case "", "strict":
	case "best-effort":
		strict = false
	default:
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option policy=%q: want strict or best-effort", opts[OptPolicy])
	}
	writeMode := SandboxWorkspaceWrite
	if m := opts[OptSandbox]; m != "" {
		if m != SandboxReadOnly && m != SandboxWorkspaceWrite && m != SandboxFullAccess {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option sandbox=%q: want %s, %s or %s", m, SandboxReadOnly, SandboxWorkspaceWrite, SandboxFullAccess)
		}
		writeMode = m
	}
	plan := planPolicy(req.Policy, req.Scripts, writeMode)
	if auth == harness.AuthHost && len(plan.rules) > 0 {
		plan.unenforced = append(plan.unenforced, "command rules with host auth (execpolicy rules live in CODEX_HOME, which host auth keeps)")
		plan.rules = nil
	}
	if strict && len(plan.unenforced) > 0 {
		return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID,
			"codex cannot enforce this policy: %s (set option policy=best-effort to run anyway)", strings.Join(plan.unenforced, "; "))
	}
	baseURL := opts[OptBaseURL]
	if baseURL != "" && auth == harness.AuthHost {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option baseURL needs api-key auth (host auth uses the host's codex login)")
	}

	exe := opts[OptExecutable]
	if exe == "" {
		exe = "codex"
	}
	args := []string{exe, "exec", "--json", "--skip-git-repo-check", "-s", plan.sandbox, "-c", `approval_policy="never"`}
	if plan.network != nil {
		args = append(args, "-c", "sandbox_workspace_write.network_access="+strconv.FormatBool(*plan.network))
	}
	if req.Model != "" {
		args = append(args, "-m", req.Model)
	}
	if e := opts[OptReasoningEffort]; e != "" {
		args = append(args, "-c", "model_reasoning_effort="+tomlString(e))
	}
	mcp, err := planMCP(req)
	if err != nil {
		return harness.Invocation{}, err
	}
	if auth == harness.AuthHost {
		args = append(args, mcp.overrides()...)
	}
	args = append(args, req.Args...)

	env := make(map[string]string, len(req.Env)+len(mcp.env)+2)
	for k, v := range req.Env {
		env[k] = v
	}
	for k, v := range mcp.env {
		env[k] = v
	}
	home := ""
	var removeAfter []string
	if auth == harness.AuthAPIKey {
		key := ""
		for _, name := range KeySecrets {
			if v, ok := req.Secrets.Value(name); ok && v != "" {
				key = v
				break
			}
		}
		if key == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID,
				"api-key auth needs the workspace secret %s (or use host auth)", strings.Join(KeySecrets, " or "))
		}
		if req.RunDir == "" || !path.IsAbs(req.RunDir) {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "no absolute run directory for CODEX_HOME")
		}
		if inv, ok, err := tryWarm(ctx, h, req, warmInputs{exe: exe, plan: plan, mcp: mcp, baseURL: baseURL, key: key, env: env}); err != nil || ok {
			return inv, err
		}
		home = path.Join(req.RunDir, "codex-home")
		switch opts[OptHome] {
		case "", "auto":
			if alt, err := homeOutsideTmp(ctx, h, req); err != nil {
				return harness.Invocation{}, err
			} else if alt != "" {
				home = alt
				removeAfter = []string{alt}
			}
		case "run":
		default:
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "option home=%q: want auto or run", opts[OptHome])
		}
		if err := harness.WriteFile(ctx, h, path.Join(home, "config.toml"), configTOML(baseURL, mcp), "600"); err != nil {
			return harness.Invocation{}, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
		}
		if len(plan.rules) > 0 {
			if err := harness.WriteFile(ctx, h, path.Join(home, "rules", "corral.rules"), rulesFile(plan.rules), "600"); err != nil {
				return harness.Invocation{}, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
			}
		}
		if err := linkSkills(ctx, h, req, home); err != nil {
			return harness.Invocation{}, err
		}
		env["CODEX_HOME"] = home
		env["CODEX_API_KEY"] = key
	}

	resume, err := setupSessions(ctx, h, req, home)
	if err != nil {
		return harness.Invocation{}, err
	}
	if resume {
		args = append(args, "resume", req.Session)
	}
	args = append(args, "-")
	if auth == harness.AuthHost {
		delete(env, "OPENAI_API_KEY")
		delete(env, "CODEX_API_KEY")
		args = append([]string{"env", "-u", "OPENAI_API_KEY", "-u", "CODEX_API_KEY"}, args...)
	}
	if len(mcp.asks) > 0 {
		// Tell the translator which servers' refused calls are asks (it
		// raises approval.requested for them), then run codex in the same
		// process.
		note := jsonString(map[string]any{"type": mcpAskLine, "servers": mcp.asks})
		args = append([]string{"sh", "-c", `printf '%s\n' "$1"; shift; exec "$@"`, "corral-codex", note}, args...)
	}
	cmd := sandbox.Command{Args: args, Env: env}
	if err := cmd.Validate(); err != nil {
		return harness.Invocation{}, err
	}
	return harness.Invocation{Command: cmd, Stdin: []byte(req.Prompt), RemoveAfter: removeAfter}, nil
}

// homeScript prints a fresh directory outside /tmp for the per-run
// CODEX_HOME when bubblewrap is installed, else nothing: codex's bwrap
// sandbox mounts a fresh /tmp, so the helper links codex keeps under
// CODEX_HOME/tmp/arg0 (on PATH) vanish inside it when CODEX_HOME is under
// /tmp, and every command fails with "bwrap: execvp codex-linux-sandbox: No
// such file or directory" (seen with codex 0.171). $1 is the run id.
// Directories left by runs whose host died are removed after a day.
const homeScript = `command -v bwrap >/dev/null 2>&1 || exit 0
for base in "${HOME:-}/.corral/codex/runs" /var/tmp/corral-codex-runs; do
  case "$base" in /.corral/*|/tmp/*) continue ;; esac
  mkdir -p "$base" 2>/dev/null && [ -w "$base" ] || continue
  find "$base" -mindepth 1 -maxdepth 1 -mmin +1440 -exec rm -rf {} + 2>/dev/null
  d="$base/$1"
  mkdir -p "$d" && chmod 700 "$d" && printf '%s\n' "$d" && exit 0
done
exit 0
`

// homeOutsideTmp returns a per-run CODEX_HOME outside /tmp when the
// sandbox has bubblewrap (see homeScript), or "".
func homeOutsideTmp(ctx context.Context, h sandbox.Handle, req harness.Request) (string, error) {
	if !runIDRE.MatchString(req.RunID) {
		return "", nil
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", homeScript, "corral-codex-home", req.RunID}, Env: req.Env})
	if err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "harness.codex", req.RunID, err)
	}
	dir := strings.TrimSpace(string(res.Stdout))
	if res.ExitCode != 0 || !path.IsAbs(dir) {
		return "", nil
	}
	return dir, nil
}

var runIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// sessionsScript links the per-run CODEX_HOME's sessions to the lasting
// sessions directory (api-key auth) and says whether session $4 can be
// resumed. $1 mode (api-key|host), $2 sessions dir (may be empty), $3 the
// per-run home, $4 the session id (may be empty).
const sessionsScript = `set -e
mode=$1 sessions=$2 home=$3 id=$4
if [ "$mode" = host ]; then
  sessions=${CODEX_HOME:-$HOME/.codex}/sessions
else
  [ -n "$sessions" ] || sessions=$HOME/.corral/codex/sessions
  mkdir -p "$sessions" "$home"
  ln -sfn "$sessions" "$home/sessions"
fi
if [ -n "$id" ] && [ -d "$sessions" ] && [ -n "$(find "$sessions" -name "rollout-*$id.jsonl" 2>/dev/null | head -n 1)" ]; then
  echo resume
else
  echo fresh
fi
`

// setupSessions prepares session storage and reports whether
// req.Session can be resumed.
func setupSessions(ctx context.Context, h sandbox.Handle, req harness.Request, home string) (bool, error) {
	const op = "harness.codex"
	id := req.Session
	if !sessionIDRE.MatchString(id) {
		id = ""
	}
	mode := "api-key"
	if home == "" {
		if id == "" {
			return false, nil
		}
		mode = "host"
	}
	res, err := h.Exec(ctx, sandbox.Command{
		Args: []string{"sh", "-c", sessionsScript, "corral-codex-sessions", mode, req.Options[OptSessionsDir], home, id},
		Env:  req.Env,
	})
	if err != nil {
		return false, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if res.ExitCode != 0 {
		return false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "preparing the codex sessions directory exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return strings.TrimSpace(string(res.Stdout)) == "resume", nil
}

// configTOML is the per-run config.toml. It holds no secret: the key is
// read from CODEX_API_KEY, the MCP servers' secret values from the
// variables they name.
func configTOML(baseURL string, mcp mcpPlan) []byte {
	var b bytes.Buffer
	b.WriteString("# Written by corral for one run. No secret here: the key is in the environment.\n")
	if baseURL != "" {
		b.WriteString("model_provider = \"corral\"\n\n[model_providers.corral]\nname = \"corral\"\n")
		b.WriteString("base_url = " + tomlString(baseURL) + "\n")
		b.WriteString("env_key = \"CODEX_API_KEY\"\nwire_api = \"responses\"\n")
	}
	b.Write(mcp.toml())
	return b.Bytes()
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string { return jsonString(s) }

// policyPlan is a sandbox.Policy in codex's terms.
type policyPlan struct {
	sandbox    string
	network    *bool
	rules      [][]string // forbidden command prefixes
	unenforced []string
}

func planPolicy(p *sandbox.Policy, scripts map[string]string, writeMode string) policyPlan {
	plan := policyPlan{sandbox: writeMode}
	p = sandbox.EffectivePolicy(p) // no policy allows everything
	or := func(d sandbox.Decision) sandbox.Decision {
		if d == "" {
			return p.Default
		}
		return d
	}
	if d := or(p.FileWrite); d == sandbox.Deny || d == sandbox.Ask {
		plan.sandbox = SandboxReadOnly
	}
	switch or(p.Network) {
	case sandbox.Allow:
		t := true
		plan.network = &t
	case sandbox.Deny, sandbox.Ask:
		f := false
		plan.network = &f
	}
	if p.Default == sandbox.Deny || p.Default == sandbox.Ask {
		plan.unenforced = append(plan.unenforced, "default "+string(p.Default)+" for commands (codex cannot confine commands to an allow-list)")
	}
	seen := map[string]bool{}
	for _, pat := range append(append([]string(nil), p.Commands.Deny...), p.Commands.Ask...) {
		forms := []string{pat}
		if cmd, ok := scripts[strings.TrimSpace(pat)]; ok {
			forms = append(forms, cmd)
		}
		for _, f := range forms {
			prefix, ok := commandPrefix(f)
			if !ok {
				plan.unenforced = append(plan.unenforced, "command pattern "+strconv.Quote(f))
				continue
			}
			if k := strings.Join(prefix, "\x00"); !seen[k] {
				seen[k] = true
				plan.rules = append(plan.rules, prefix)
			}
		}
	}
	return plan
}

// commandPrefix turns a policy glob into an execpolicy token prefix: plain
// words, optionally followed by a lone "*".
func commandPrefix(glob string) ([]string, bool) {
	words := strings.Fields(glob)
	if n := len(words); n > 0 && words[n-1] == "*" {
		words = words[:n-1]
	}
	if len(words) == 0 {
		return nil, false
	}
	for _, w := range words {
		for _, r := range w {
			if r < 0x21 || r > 0x7e || strings.ContainsRune("*?\"'`\\$;&|<>(){}[]#~", r) {
				return nil, false
			}
		}
	}
	return words, true
}

// rulesFile is the execpolicy (Starlark) file forbidding the prefixes.
// Tokens are printable ASCII without quotes or backslashes, so plain
// double quotes are enough.
func rulesFile(rules [][]string) []byte {
	var b bytes.Buffer
	b.WriteString("# Written by corral from the sandbox policy for one run.\n")
	for _, r := range rules {
		b.WriteString("prefix_rule(pattern = [")
		for i, tok := range r {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`"` + tok + `"`)
		}
		b.WriteString(`], decision = "forbidden", justification = "not allowed by the sandbox policy")` + "\n")
	}
	return b.Bytes()
}

// InstallHint says how to install the Codex CLI in an image.
func (Harness) InstallHint() string {
	return "the codex CLI is not installed in the sandbox: add it to the image (npm install -g @openai/codex), or point --option executable=PATH at it"
}
