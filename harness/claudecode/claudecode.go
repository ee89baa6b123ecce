// Package claudecode is the harness for Anthropic's Claude Code CLI
// ("claude"), run headless: claude -p --output-format stream-json
// --verbose --include-partial-messages, the prompt on stdin.
//
// # Auth
//
// harness.AuthAPIKey (the default) gives the CLI the workspace secret
// ANTHROPIC_API_KEY (and ANTHROPIC_AUTH_TOKEN when that secret exists)
// through its environment, never argv. harness.AuthHost lets the CLI use
// its own login: the command runs under "env -u" for ANTHROPIC_API_KEY,
// ANTHROPIC_AUTH_TOKEN and ANTHROPIC_BASE_URL, so nothing inherited
// overrides it.
//
// # Options
//
//   - executable: the CLI to run (default "claude"); whitespace separates
//     a program from leading arguments ("node cli.js").
//   - baseURL: ANTHROPIC_BASE_URL for the CLI (a proxy, or a test's fake
//     model endpoint); api-key auth only.
//   - permissionMode: force a permission mode. bypassPermissions is
//     refused while the policy guards anything.
//   - isSandbox: "true" or "false" overrides whether IS_SANDBOX=1 is set
//     (see below).
//   - partialMessages: "false" drops --include-partial-messages (text then
//     arrives a whole block at a time).
//   - policy: "strict" (default) refuses to run a policy that guards
//     anything in a sandbox without node (corral's permission tool needs
//     it); "best-effort" runs it with Claude Code's own rules instead (see
//     below), and the run's policy.unenforced event says what that misses.
//   - warm: "true" keeps the CLI running between the thread's runs and
//     hands it each next prompt (see warm.go); default "false".
//
// # Permissions
//
// The sandbox policy maps onto the CLI (see planPermissions): no policy,
// or one that allows everything, runs in bypassPermissions; any rule runs
// in the default mode with corral's permission-prompt tool, a tiny MCP
// server on stdio (approve.js, run by node inside the sandbox) that
// decides every Bash, file-write and network call with the policy's exact
// rules and answers allow with updatedInput, or deny. A decision of "ask"
// is denied for this run and becomes an approval.requested event; the
// answer given for its id in a later run (Request.Approvals, corral run
// --approve/--deny) reaches the tool in its policy file, which then allows
// or denies the call without asking again. With option approvalWait (a
// Go duration) an ask waits instead, with the turn, in the tool for a live
// answer (harness.LiveApprover; Runner.Answer appends it to the run's
// harness.AnswersFile, which the tool polls every answerPoll, default
// 250ms): the tool appends approval lines to the run's journal
// (Request.Journal), which become approval.requested, approval.waiting
// and approval.answered, and the call goes on or is denied in the same
// turn; when the wait passes, the policy's default decides (an ask
// default denies). Each answer line carries an HMAC under
// Request.AnswerKey; the tool gets the key in RunDir/answer.key, reads it
// and unlinks it when Claude Code starts it, and ignores (and reports as
// a claudecode.warning) lines the key does not authenticate. Without
// node in the sandbox Prepare fails, unless option policy=best-effort
// lets the harness fall back to dontAsk with --allowedTools and
// --disallowedTools rules. Bypass is never used while the policy has rules.
// What the tool cannot hold (UnenforcedRules): the fileWrite and network
// gates reach Claude Code's file-editing and web tools, not a shell command
// the policy lets run.
//
// # Workspace projection
//
// Every run hands the CLI the workspace's skills and MCP servers through
// files in the run's private directory (Request.RunDir, outside the
// workspace and removed after the run), so nothing is written into the
// workspace and nothing shows in git status or file.changed. Both need
// the run directory: without one, Prepare fails (FailedPrecondition) when
// there is something to project.
//
// Skills: the CLI runs with --setting-sources user (so the workspace's
// .claude settings cannot loosen the policy), which also keeps it from
// loading the workspace's .claude/skills. Instead the SKILL.md directories
// under Request.SkillRoots (harness.FindSkills) are linked, by name, into
// RunDir/claude-plugin/skills, next to a plugin.json naming the plugin
// "corral-workspace", and the run passes --plugin-dir RunDir/claude-plugin.
// The model sees them as "corral-workspace:<name>".
//
// MCP servers: the workspace's servers (checked with
// sandbox.ValidateMCPServers; errors are InvalidArgument and never carry a
// secret value) join the permission tool's server in one --mcp-config
// file, RunDir/mcp.json (mode 600): stdio as {type, command, args, env},
// http and sse as {type, url, headers}. The name "corral" belongs to the
// permission tool (mcp__corral__approve): a workspace server of that name
// is refused whatever the policy. A header or env value that names a
// secret (${secret:NAME}) never enters the file or argv: its expanded value
// goes into the CLI's environment as CORRAL_MCP_VALUE_<n>, which the file
// references as ${CORRAL_MCP_VALUE_<n>} and Claude Code expands when it
// starts the server. Any other value holding "${" takes the same route, so
// it reaches the server literally instead of being expanded from the
// CLI's environment. Limits, as of Claude Code 2.1.332: the CLI expands
// http/sse header values a second time, so a header whose value (a
// secret's included) itself holds ${NAME} is expanded against the CLI's
// environment; with CLAUDE_CODE_SUBPROCESS_ENV_SCRUB=1 the CLI reads
// header references toward remote servers as empty (stdio env values still
// arrive); the variables are in the CLI's environment, so commands the
// agent runs can inherit them (as they can the API key); and the CLI
// defers MCP tools behind its tool search (ENABLE_TOOL_SEARCH), listing
// only their names to the model until it loads them. Calls of a server's tools
// follow the permission mode: allowed in bypassPermissions, decided by the
// policy's default through the permission tool, denied in dontAsk.
//
// Instructions: --setting-sources user also keeps the CLI from reading the
// workspace's CLAUDE.md (checked with 2.1.332), so the workspace's
// CLAUDE.md, else its AGENTS.md, is handed over with
// --append-system-prompt-file (read when the CLI starts, so the file as it
// is then).
//
// # IS_SANDBOX
//
// Claude Code refuses bypassPermissions as root unless IS_SANDBOX=1 says
// the machine is disposable. The harness sets it unless the sandbox is the
// corral host itself, which it finds out by fact, not by provider name:
// it writes a random probe file through the sandbox and looks for it at
// the same path on this host. A sandbox whose files are the host's is the
// host. The isSandbox option overrides the probe.
//
// # Sessions
//
// The CLI's init event becomes a session.started event. With
// Request.Session set, Prepare looks for the session's transcript under
// the CLI's config directory inside the sandbox
// (${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects/*/SESSION.jsonl): when it
// is there the run passes --resume; when it is gone (a new sandbox, say)
// the run starts a fresh session and its journal's first line — written by
// the command itself, so a replay sees it too — becomes a
// session.resume_failed event naming the lost session.
package claudecode

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the harness's name.
const Name = "claude-code"

// Secret names the harness reads in api-key auth.
const (
	APIKeySecret    = "ANTHROPIC_API_KEY"
	AuthTokenSecret = "ANTHROPIC_AUTH_TOKEN"
)

// ResumeFailed is the custom event for a session that could not be
// resumed (value: event.Session, the lost session's id).
const ResumeFailed = "session.resume_failed"

// hostScrub are the variables removed from the CLI's environment in host
// auth.
var hostScrub = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"}

var knownOptions = map[string]bool{"executable": true, "baseURL": true, "permissionMode": true, "isSandbox": true, "partialMessages": true, OptPolicy: true, OptApprovalWait: true, OptAnswerPoll: true, OptWarm: true}

var validModes = map[string]bool{"acceptEdits": true, "auto": true, ModeBypass: true, "manual": true, ModeDontAsk: true, "plan": true, ModeDefault: true}

//go:embed approve.js
var approveJS []byte

// Harness runs Claude Code. The zero value is ready to use.
type Harness struct{}

var _ harness.Harness = Harness{}

// Name returns "claude-code".
func (Harness) Name() string { return Name }

// Translator returns a stream-json translator for one run.
func (Harness) Translator(run harness.Run) harness.Translator { return newTranslator(run) }

// Prepare builds the claude command for a run; see the package comment.
func (Harness) Prepare(ctx context.Context, h sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	const op = "claudecode.prepare"
	if strings.TrimSpace(req.Prompt) == "" {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "the prompt is empty")
	}
	var unknown []string
	for k := range req.Options {
		if !knownOptions[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "unknown option %s (known: answerPoll, approvalWait, baseURL, executable, isSandbox, partialMessages, permissionMode, policy, warm)", strings.Join(unknown, ", "))
	}
	if err := checkMCPServers(req); err != nil {
		return harness.Invocation{}, err
	}
	wait, poll, err := liveOptions(req)
	if err != nil {
		return harness.Invocation{}, err
	}
	opt := func(k string) string { return strings.TrimSpace(req.Options[k]) }
	warm := false
	if v := opt(OptWarm); v != "" {
		if warm, err = strconv.ParseBool(v); err != nil {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "warm must be true or false")
		}
	}
	exe := strings.Fields(opt("executable"))
	if len(exe) == 0 {
		exe = []string{"claude"}
	}

	env := map[string]string{}
	for k, v := range req.Env {
		env[k] = v
	}
	var prefix []string // argv before the CLI
	switch req.Auth {
	case "", harness.AuthAPIKey:
		for _, name := range []string{APIKeySecret, AuthTokenSecret} {
			if v, ok := req.Secrets.Value(name); ok {
				env[name] = v
			}
		}
		if u := opt("baseURL"); u != "" {
			env["ANTHROPIC_BASE_URL"] = u
		}
	case harness.AuthHost:
		if opt("baseURL") != "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "the baseURL option needs api-key auth; host auth uses the CLI's own login")
		}
		prefix = []string{"env"}
		for _, name := range hostScrub {
			delete(env, name)
			prefix = append(prefix, "-u", name)
		}
	default:
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "unknown auth mode %q (want api-key or host)", req.Auth)
	}

	sandboxed, err := isSandbox(ctx, h, req, opt("isSandbox"))
	if err != nil {
		return harness.Invocation{}, err
	}
	if sandboxed {
		env["IS_SANDBOX"] = "1"
	}

	args := append(append([]string{}, exe...), "-p", "--output-format", "stream-json", "--verbose")
	switch opt("partialMessages") {
	case "", "true":
		args = append(args, "--include-partial-messages")
	case "false":
	default:
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "partialMessages must be true or false")
	}
	args = append(args, "--setting-sources", "user")
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}

	// Permissions.
	withTool := false
	bestEffort, err := policyMode(opt(OptPolicy))
	if err != nil {
		return harness.Invocation{}, sandbox.Wrap(sandbox.InvalidArgument, op, req.RunID, err)
	}
	if !unrestricted(req.Policy) {
		if withTool, err = hasNode(ctx, h, env); err != nil {
			return harness.Invocation{}, err
		}
		if !withTool && !bestEffort {
			return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID,
				"enforcing the sandbox policy needs node in the sandbox (corral's permission tool runs on it): install node, or set option policy=best-effort to let Claude Code's own rules approximate the policy")
		}
	}
	pm := planPermissions(req.Policy, withTool)
	mode, err := permissionMode(req)
	if err != nil {
		return harness.Invocation{}, err
	}
	if mode != "" {
		if !validModes[mode] {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "unknown permission mode %q", mode)
		}
		if mode == ModeBypass && !unrestricted(req.Policy) {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "permission mode bypassPermissions would ignore the sandbox policy's rules")
		}
		pm.mode = mode
	}
	servers := map[string]any{}
	if pm.promptTool {
		if req.RunDir == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID, "the permission tool needs a run directory")
		}
		lw, err := prepareLive(ctx, h, req, wait, poll)
		if err != nil {
			return harness.Invocation{}, err
		}
		script, policyFile := path.Join(req.RunDir, "approve.js"), path.Join(req.RunDir, "policy.json")
		for _, f := range []struct {
			path string
			data []byte
		}{{script, approveJS}, {policyFile, compilePolicy(req.Policy, req.Scripts, req.Approvals, lw)}} {
			if err := harness.WriteFile(ctx, h, f.path, f.data, "600"); err != nil {
				return harness.Invocation{}, sandbox.Wrap(sandbox.Internal, op, f.path, err)
			}
		}
		server := map[string]any{"type": "stdio", "command": "node", "args": []string{script, policyFile}}
		if lw.wait > 0 {
			// Claude Code's per-server tool-call timeout, in milliseconds:
			// the tool may wait the whole approvalWait.
			server["timeout"] = (lw.wait + toolTimeoutMargin).Milliseconds()
		}
		servers[permissionServer] = server
	}

	// The workspace's MCP servers join the permission tool's in one
	// --mcp-config file; their secret values travel in the environment.
	if len(req.MCPServers) > 0 {
		if req.RunDir == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID, "the workspace's MCP servers need a run directory (their configuration file lives there)")
		}
		se := harness.NewSecretEnv(req.Secrets)
		ws, err := harness.MCPConfig(req.MCPServers, se)
		if err != nil {
			return harness.Invocation{}, err
		}
		for k, v := range ws {
			servers[k] = v
		}
		for k, v := range se.Env {
			env[k] = v
		}
	}
	if len(servers) > 0 {
		mcpFile := path.Join(req.RunDir, "mcp.json")
		if err := harness.WriteFile(ctx, h, mcpFile, []byte(mustJSON(map[string]any{"mcpServers": servers})), "600"); err != nil {
			return harness.Invocation{}, sandbox.Wrap(sandbox.Internal, op, mcpFile, err)
		}
		// --mcp-config takes several values: an option always follows it
		// (--permission-mode, below).
		args = append(args, "--mcp-config", mcpFile)
	}

	// The workspace's skills, as a per-run plugin.
	pluginDir, err := projectSkills(ctx, h, req)
	if err != nil {
		return harness.Invocation{}, err
	}
	if pluginDir != "" {
		args = append(args, "--plugin-dir", pluginDir)
	}

	// The workspace's instructions: --setting-sources user also keeps the
	// CLI from reading the workspace's CLAUDE.md, so hand it over.
	instructions, err := instructionsFile(ctx, h, req)
	if err != nil {
		return harness.Invocation{}, err
	}
	if instructions != "" {
		args = append(args, "--append-system-prompt-file", instructions)
	}

	if req.Session != "" && !sessionRE.MatchString(req.Session) {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "malformed session id %q", req.Session)
	}
	// flags are the permission flags (with settings) and the caller's.
	flags := func(settings map[string]any) []string {
		a := []string{"--permission-mode", pm.mode}
		if len(settings) > 0 {
			a = append(a, "--settings", mustJSON(settings))
		}
		if len(pm.allowed) > 0 {
			a = append(a, "--allowedTools", strings.Join(pm.allowed, ","))
		}
		if len(pm.disallowed) > 0 {
			a = append(a, "--disallowedTools", strings.Join(pm.disallowed, ","))
		}
		if pm.promptTool {
			a = append(a, "--permission-prompt-tool", promptTool)
		}
		return append(a, req.Args...)
	}
	if warm && !pm.promptTool && len(servers) == 0 && pluginDir == "" && req.ThreadID != "" && req.RunDir != "" {
		// The keeper check looks for the session itself, in the same exec.
		// The keeper's tools wait on the diff gate (warmSettings).
		wargs := append(append(slices.Clip(prefix), args...), flags(warmSettings(pm.settings, warmGate(req)))...)
		inv, ok, err := prepareWarm(ctx, h, req, warmTurn{args: wargs, env: env, session: req.Session, instr: instructions})
		if ok || err != nil {
			return inv, err
		}
	}
	args = append(args, flags(pm.settings)...)

	// Session resume.
	resume, note := "", ""
	if req.Session != "" {
		found, err := sessionExists(ctx, h, env, req.Session)
		if err != nil {
			return harness.Invocation{}, err
		}
		if found {
			resume = req.Session
		} else {
			note = mustJSON(map[string]any{"type": "corral", "subtype": "resume_failed", "session_id": req.Session})
		}
	}
	if resume != "" {
		args = append(args, "--resume", resume)
	}
	if note != "" {
		// Say so in the journal, then run the CLI in the same process.
		prefix = append([]string{"sh", "-c", `printf '%s\n' "$1"; shift; exec "$@"`, "corral-claude", note}, prefix...)
	}
	cmd := sandbox.Command{Args: append(prefix, args...), Env: env}
	if err := cmd.Validate(); err != nil {
		return harness.Invocation{}, err
	}
	return harness.Invocation{Command: cmd, Stdin: []byte(req.Prompt)}, nil
}

var sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

// isSandbox decides IS_SANDBOX: the option when given, else whether a
// probe file written through the sandbox is absent from this host.
func isSandbox(ctx context.Context, h sandbox.Handle, req harness.Request, override string) (bool, error) {
	const op = "claudecode.prepare"
	if override != "" {
		b, err := strconv.ParseBool(override)
		if err != nil {
			return false, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "isSandbox must be true or false")
		}
		return b, nil
	}
	dir := req.RunDir
	if dir == "" {
		dir = "/tmp"
	}
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	probe := path.Join(dir, ".corral-host-probe-"+hex.EncodeToString(nonce[:4]))
	want := hex.EncodeToString(nonce)
	if err := harness.WriteFile(ctx, h, probe, []byte(want), "600"); err != nil {
		return false, sandbox.Wrap(sandbox.Internal, op, probe, err)
	}
	got, readErr := os.ReadFile(probe)
	if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"rm", "-f", probe}}); err != nil {
		return false, sandbox.Wrap(sandbox.Internal, op, probe, err)
	}
	onHost := readErr == nil && bytes.Equal(got, []byte(want))
	return !onHost, nil
}

// hasNode reports whether node runs in the sandbox (for the permission
// tool).
func hasNode(ctx context.Context, h sandbox.Handle, env map[string]string) (bool, error) {
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", "command -v node >/dev/null 2>&1"}, Env: env})
	if err != nil {
		return false, sandbox.Wrap(sandbox.Internal, "claudecode.prepare", "node", err)
	}
	return res.ExitCode == 0, nil
}

// sessionExists looks for the session's transcript in the CLI's config
// directory inside the sandbox.
func sessionExists(ctx context.Context, h sandbox.Handle, env map[string]string, id string) (bool, error) {
	const script = `d=${CLAUDE_CONFIG_DIR:-$HOME/.claude}; for f in "$d"/projects/*/"$1".jsonl; do [ -f "$f" ] && exit 0; done; exit 1`
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", script, "corral-session", id}, Env: env})
	if err != nil {
		return false, sandbox.Wrap(sandbox.Internal, "claudecode.prepare", id, err)
	}
	return res.ExitCode == 0, nil
}

func mustJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("claudecode: " + err.Error())
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// InstallHint says how to install the Claude Code CLI in an image.
func (Harness) InstallHint() string {
	return "the claude CLI is not installed in the sandbox: add it to the image (npm install -g @anthropic-ai/claude-code; needs node), or point --option executable=PATH at it"
}
