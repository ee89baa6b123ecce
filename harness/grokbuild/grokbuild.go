// Package grokbuild is the harness for xAI's Grok Build CLI (harness name
// "grok") in its headless mode:
//
//	grok --output-format streaming-json --prompt-file FILE --cwd ROOT --no-auto-update
//	     [-m MODEL] [--resume SESSION] [--max-turns N] [--reasoning-effort E]
//	     (policy flags) (Request.Args)
//
// The CLI writes one JSON object per line (thought, text, tool_call,
// tool_call_update, plan, usage, end, error, ...), which the journal keeps
// and the translator turns into events; end carries the session id, which
// the thread's next run resumes with --resume.
//
// The prompt goes in a 0600 file in Request.RunDir, never argv. The API key
// is a workspace secret, XAI_API_KEY or else GROK_API_KEY, handed to the CLI
// as XAI_API_KEY in its environment; with AuthHost both variables are
// removed so the CLI uses its own login. Options["executable"] names the
// CLI (whitespace separates words, e.g. "node fake.mjs"); by default
// $HOME/.grok/bin/grok when it exists, else grok on PATH.
//
// # Policy
//
// Headless Grok cannot ask anyone, so the policy becomes its permission
// flags: a default of allow (and no policy, which allows everything) is
// --always-approve, anything else
// --permission-mode default (a call that would prompt is cancelled, and
// the turn ends "cancelled"). Command deny and ask rules become --deny
// Bash(PATTERN) (an ask cannot be answered mid-run, so it denies; the
// pattern's script alias is added too), allow rules --allow Bash(PATTERN);
// the fileWrite gate maps to Edit and Write, the network gate to WebFetch
// (and --disable-web-search when not allowed).
//
// # MCP servers
//
// The workspace's MCP servers (Request.MCPServers) are merged into the
// workspace's .grok/config.toml, never overwriting it: other keys and
// servers are kept, and a file that is not TOML stops the run. Because
// the merged file carries secret values, it is written to the run's
// private directory and put in place by the wrapper only after the journal
// took its "before" picture of the work tree; the original bytes are saved
// there too and put back when the CLI exits (the wrapper traps SIGTERM for
// that), before the "after" picture, so the file.changed diff never holds
// a secret. A file that did not exist is removed again (also through
// Invocation.Cleanup).
package grokbuild

import (
	"context"
	"path"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the harness's name.
const Name = "grok"

// Request.Options keys this harness reads.
const (
	OptionExecutable = "executable" // the CLI's command (words split on whitespace)
	OptionMaxTurns   = "maxTurns"   // --max-turns
	OptionEffort     = "effort"     // --reasoning-effort
)

// Secrets the API key is read from, in order.
var keySecrets = []string{"XAI_API_KEY", "GROK_API_KEY"}

// Harness runs Grok Build. The zero value is ready to use.
type Harness struct{}

var _ harness.Harness = Harness{}

// Name returns "grok".
func (Harness) Name() string { return Name }

// Translator returns the translator of Grok's streaming-json.
func (Harness) Translator(run harness.Run) harness.Translator { return newTranslator(run) }

// wrapperScript runs the CLI. $1 the workspace config's real path ("" when
// there are no MCP servers to merge), $2 the merged config to put there
// for the run, $3 where to save the original, $4 "host" to drop the API
// keys, $5 "probe" to prefer $HOME/.grok/bin/grok over the first argument;
// the CLI's argv follows. The merged config (it carries secret values) is
// put in place here, after the journal took its "before" picture of the
// work tree, and the original is put back before the "after" picture, so
// neither the file.changed diff nor the workspace keeps a secret. With a
// config to restore the CLI runs in the background so SIGTERM (a cancel)
// still restores it.
const wrapperScript = `cg_cfg=$1 cg_new=$2 cg_orig=$3 cg_auth=$4 cg_probe=$5
shift 5
if [ "$cg_auth" = host ]; then unset XAI_API_KEY GROK_API_KEY; fi
if [ "$cg_probe" = probe ] && [ -x "$HOME/.grok/bin/grok" ]; then shift; set -- "$HOME/.grok/bin/grok" "$@"; fi
if [ -z "$cg_cfg" ]; then exec "$@"; fi
rm -f "$cg_orig"
if [ -f "$cg_cfg" ]; then cp "$cg_cfg" "$cg_orig" || exit 1; fi
mkdir -p "$(dirname "$cg_cfg")" && (umask 077 && cat "$cg_new" >"$cg_cfg") || exit 1
"$@" &
cg_p=$!
trap 'kill -TERM "$cg_p" 2>/dev/null' TERM INT HUP
while :; do
  wait "$cg_p"; cg_rc=$?
  kill -0 "$cg_p" 2>/dev/null || break
done
if [ -f "$cg_orig" ]; then cat "$cg_orig" >"$cg_cfg"; else rm -f "$cg_cfg"; rmdir "$(dirname "$cg_cfg")" 2>/dev/null; fi
exit "$cg_rc"
`

// Prepare writes the prompt file (and merges MCP servers into the
// workspace's Grok configuration) and returns the CLI's command.
func (Harness) Prepare(ctx context.Context, hd sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	const op = "harness.grok"
	if strings.TrimSpace(req.Prompt) == "" {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "no prompt")
	}
	if req.RunDir == "" || !path.IsAbs(req.RunDir) {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "the run needs an absolute private directory (Request.RunDir)")
	}
	root := req.WorkspaceRoot
	if root == "" {
		root = hd.WorkspaceRoot()
	}
	env := map[string]string{"GROK_DISABLE_AUTOUPDATER": "1"}
	for k, v := range req.Env {
		env[k] = v
	}
	auth := "api-key"
	switch req.Auth {
	case harness.AuthHost:
		auth = "host"
	case "", harness.AuthAPIKey:
		key := ""
		for _, name := range keySecrets {
			if v, ok := req.Secrets.Value(name); ok && v != "" {
				key = v
				break
			}
		}
		if key == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID,
				"Grok needs an API key: add the workspace secret XAI_API_KEY (or GROK_API_KEY), or run with auth host to use the CLI's own login")
		}
		env["XAI_API_KEY"] = key
	default:
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, string(req.Auth), "unknown auth mode")
	}

	exe := strings.Fields(req.Options[OptionExecutable])
	probe := ""
	if len(exe) == 0 {
		exe, probe = []string{"grok"}, "probe"
	}
	promptFile := path.Join(req.RunDir, "prompt.md")
	argv := append(exe, "--output-format", "streaming-json", "--prompt-file", promptFile, "--cwd", root, "--no-auto-update")
	if req.Model != "" {
		argv = append(argv, "-m", req.Model)
	}
	if req.Session != "" {
		argv = append(argv, "--resume", req.Session)
	}
	if s := req.Options[OptionMaxTurns]; s != "" {
		if n, err := strconv.Atoi(s); err != nil || n <= 0 {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, OptionMaxTurns, "%q is not a positive integer", s)
		}
		argv = append(argv, "--max-turns", s)
	}
	if s := req.Options[OptionEffort]; s != "" {
		argv = append(argv, "--reasoning-effort", s)
	}
	argv = append(argv, policyFlags(req.Policy, req.Scripts)...)
	argv = append(argv, req.Args...)

	servers, err := sandbox.ResolveMCPServers(req.MCPServers, req.Secrets)
	if err != nil {
		return harness.Invocation{}, err
	}
	if err := harness.WriteFile(ctx, hd, promptFile, []byte(req.Prompt), "600"); err != nil {
		return harness.Invocation{}, err
	}
	var inv harness.Invocation
	cfg, merged, orig := "", "", ""
	if len(servers) > 0 {
		existing, err := hd.FS().ReadFile(ctx, ConfigPath)
		existed := err == nil
		if err != nil && sandbox.CodeOf(err) != sandbox.NotFound {
			return harness.Invocation{}, err
		}
		doc, err := mergeConfig(existing, servers)
		if err != nil {
			return harness.Invocation{}, err
		}
		cfg, merged, orig = path.Join(root, ConfigPath), path.Join(req.RunDir, "grok-config.toml"), path.Join(req.RunDir, "grok-config.orig")
		if err := harness.WriteFile(ctx, hd, merged, doc, "600"); err != nil {
			return harness.Invocation{}, err
		}
		if !existed {
			inv.Cleanup = []string{ConfigPath}
		}
	}
	inv.Command = sandbox.Command{Args: append([]string{"sh", "-c", wrapperScript, "corral-grok", cfg, merged, orig, auth, probe}, argv...), Env: env}
	if err := inv.Command.Validate(); err != nil {
		return harness.Invocation{}, err
	}
	return inv, nil
}

// policyFlags maps a policy onto Grok's permission flags (see the package
// documentation).
func policyFlags(p *sandbox.Policy, scripts map[string]string) []string {
	p = sandbox.EffectivePolicy(p) // no policy allows everything
	def := sandbox.Ask
	if p.Default != "" {
		def = p.Default
	}
	var out []string
	if def == sandbox.Allow {
		out = append(out, "--always-approve")
	} else {
		out = append(out, "--permission-mode", "default")
	}
	patterns := func(list []string) []string {
		var ps []string
		seen := map[string]bool{}
		for _, pat := range list {
			forms := []string{pat}
			if cmd, ok := scripts[pat]; ok {
				forms = append(forms, strings.TrimSpace(cmd))
			}
			for _, f := range forms {
				if f != "" && !seen[f] {
					seen[f] = true
					ps = append(ps, f)
				}
			}
		}
		return ps
	}
	for _, pat := range patterns(append(append([]string{}, p.Commands.Deny...), p.Commands.Ask...)) {
		out = append(out, "--deny", "Bash("+pat+")")
	}
	for _, pat := range patterns(p.Commands.Allow) {
		out = append(out, "--allow", "Bash("+pat+")")
	}
	switch p.Capability("fileWrite") {
	case sandbox.Allow:
		if def != sandbox.Allow {
			out = append(out, "--allow", "Edit", "--allow", "Write")
		}
	default:
		out = append(out, "--deny", "Edit", "--deny", "Write")
	}
	switch p.Capability("network") {
	case sandbox.Allow:
		if def != sandbox.Allow {
			out = append(out, "--allow", "WebFetch")
		}
	default:
		out = append(out, "--disable-web-search", "--deny", "WebFetch")
	}
	return out
}

// InstallHint says how to install the Grok Build CLI in an image.
func (Harness) InstallHint() string {
	return "the grok CLI is not installed in the sandbox: install Grok Build in the image (it is not on npm; see xAI's install instructions), or point --option executable=PATH at it"
}
