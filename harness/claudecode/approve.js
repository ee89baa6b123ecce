// corral's permission-prompt tool for Claude Code: a minimal MCP server on
// stdio (newline-delimited JSON-RPC 2.0) with one tool, "approve", that
// Claude Code calls (--permission-prompt-tool mcp__corral__approve) before
// any action its permission mode does not settle by itself. It decides
// with the sandbox policy corral wrote to the JSON file named in argv[2]
// (the same rules as sandbox.Policy, compiled by the Go harness) and
// answers {"behavior":"allow","updatedInput":…} or
// {"behavior":"deny","message":…}. No network, no state, no dependencies.
"use strict";
const fs = require("fs");
const readline = require("readline");

const policy = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const compile = (srcs) => (srcs || []).map((s) => new RegExp(s));
const rules = { deny: compile(policy.deny), ask: compile(policy.ask), allow: compile(policy.allow) };
const scripts = policy.scripts || {};

// aliases: the command itself, the script it names, the scripts it is.
function aliases(s) {
  const out = [s];
  if (Object.prototype.hasOwnProperty.call(scripts, s)) out.push(String(scripts[s]).trim());
  for (const [name, cmd] of Object.entries(scripts)) if (String(cmd).trim() === s) out.push(name);
  return out;
}

function evaluateCommand(command) {
  if (!policy.hasCommandRules) return policy.default;
  const forms = aliases(String(command).trim());
  const matches = (res) => res.some((re) => forms.some((f) => re.test(f)));
  if (matches(rules.deny)) return "deny";
  if (matches(rules.ask)) return "ask";
  if (matches(rules.allow)) return "allow";
  return policy.default;
}

const fileWriteTools = new Set(["Write", "Edit", "MultiEdit", "NotebookEdit"]);
const networkTools = new Set(["WebFetch", "WebSearch"]);

function decide(toolName, input) {
  input = input && typeof input === "object" ? input : {};
  if (toolName === "Bash") return { kind: "command", target: String(input.command || ""), decision: evaluateCommand(input.command || "") };
  if (fileWriteTools.has(toolName)) return { kind: "fileWrite", target: String(input.file_path || input.notebook_path || ""), decision: policy.fileWrite };
  if (networkTools.has(toolName)) return { kind: "network", target: String(input.url || input.query || ""), decision: policy.network };
  return { kind: "tool", target: String(toolName), decision: policy.default };
}

function approve(args) {
  const input = args && typeof args.input === "object" && args.input !== null ? args.input : {};
  const d = decide(args ? args.tool_name : "", input);
  if (d.decision === "allow") return { behavior: "allow", updatedInput: input };
  if (d.decision === "ask") {
    const id = policy.provider + ":" + d.kind + ":" + d.target;
    // An answer given for this approval id (corral run --approve/--deny).
    const decisions = policy.decisions || {};
    if (Object.prototype.hasOwnProperty.call(decisions, id)) {
      if (decisions[id] === true) return { behavior: "allow", updatedInput: input };
      return { behavior: "deny", message: "Denied: approval " + id + " was refused." };
    }
    return {
      behavior: "deny",
      message: "This action needs a person's approval under the sandbox policy; it was not run.\n" +
        policy.marker + JSON.stringify({ approvalId: id, kind: d.kind, target: d.target }),
    };
  }
  return { behavior: "deny", message: "Denied by the sandbox policy." };
}

const tool = {
  name: "approve",
  description: "Decides whether an action is allowed by the sandbox policy.",
  inputSchema: {
    type: "object",
    properties: { tool_name: { type: "string" }, input: { type: "object" }, tool_use_id: { type: "string" } },
    required: ["tool_name", "input"],
  },
};

function reply(id, result, error) {
  const msg = { jsonrpc: "2.0", id };
  if (error) msg.error = error;
  else msg.result = result;
  process.stdout.write(JSON.stringify(msg) + "\n");
}

readline.createInterface({ input: process.stdin, terminal: false }).on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch (e) {
    reply(null, null, { code: -32700, message: "parse error" });
    return;
  }
  const isRequest = msg && msg.id !== undefined && msg.id !== null;
  switch (msg && msg.method) {
    case "initialize":
      reply(msg.id, {
        protocolVersion: (msg.params && msg.params.protocolVersion) || "2024-11-05",
        capabilities: { tools: {} },
        serverInfo: { name: "corral", version: "1.0.0" },
      });
      return;
    case "ping":
      reply(msg.id, {});
      return;
    case "tools/list":
      reply(msg.id, { tools: [tool] });
      return;
    case "tools/call": {
      const p = msg.params || {};
      if (p.name !== tool.name) {
        reply(msg.id, { content: [{ type: "text", text: "unknown tool " + p.name }], isError: true });
        return;
      }
      reply(msg.id, { content: [{ type: "text", text: JSON.stringify(approve(p.arguments || {})) }] });
      return;
    }
    default:
      if (isRequest) reply(msg.id, null, { code: -32601, message: "method not found: " + (msg && msg.method) });
  }
});
