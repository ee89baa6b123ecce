// corral's permission-prompt tool for Claude Code: a minimal MCP server on
// stdio (newline-delimited JSON-RPC 2.0) with one tool, "approve", that
// Claude Code calls (--permission-prompt-tool mcp__corral__approve) before
// any action its permission mode does not settle by itself. It decides
// with the sandbox policy corral wrote to the JSON file named in argv[2]
// (the same rules as sandbox.Policy, compiled by the Go harness) and
// answers {"behavior":"allow","updatedInput":…} or
// {"behavior":"deny","message":…}. No network, no dependencies.
//
// Live answers: with policy.wait (milliseconds) set, an ask that no
// earlier answer settles waits, with the turn, for an answer appended to
// policy.answers (harness.AnswersFile: one {"approvalId","allow","mac"}
// line each, the mac an HMAC-SHA256 under the run's answer key, which this
// tool reads from policy.keyFile and unlinks at once). While it waits it
// appends {"type":"corral","subtype":"approval_waiting",…} to the run's
// journal (policy.journal, O_APPEND, one write per line), and when the
// request is settled {"subtype":"approval_answered",…}: by an answer, or at
// the deadline by the policy's default (an ask default denies). A line of
// the answers file the key does not authenticate (written inside the
// sandbox) counts for nothing and is reported as approval_warning.
"use strict";
const crypto = require("crypto");
const fs = require("fs");
const readline = require("readline");

const policy = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

// The answer key, read once and removed: the agent (same uid) cannot read
// a file that is gone, and a child cannot read its parent's memory under
// Yama ptrace_scope ≥ 1.
let answerKey = null;
if (policy.keyFile) {
  try {
    answerKey = Buffer.from(fs.readFileSync(policy.keyFile, "utf8").trim(), "hex");
  } catch (e) {
    answerKey = null;
  }
  try {
    fs.unlinkSync(policy.keyFile);
  } catch (e) {}
  if (answerKey && answerKey.length === 0) answerKey = null;
}
const live = () => policy.wait > 0 && answerKey !== null && !!policy.answers && !!policy.journal;
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

// journal appends one line to the run's journal in one write.
function journal(rec) {
  try {
    fs.appendFileSync(policy.journal, JSON.stringify(Object.assign({ type: "corral" }, rec)) + "\n");
  } catch (e) {}
}

function mac(id, allow) {
  return crypto.createHmac("sha256", answerKey).update("corral-answer\x00" + id + "\x00" + String(allow)).digest("hex");
}

let refusedSeen = 0;

// readAnswers returns the authenticated answers (the last per id wins)
// and how many lines were refused.
function readAnswers() {
  let text = "";
  try {
    text = fs.readFileSync(policy.answers, "utf8");
  } catch (e) {
    return { answers: new Map(), refused: 0 };
  }
  const answers = new Map();
  let refused = 0;
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    let a;
    try {
      a = JSON.parse(line);
    } catch (e) {
      refused++;
      continue;
    }
    const ok = a && typeof a.approvalId === "string" && a.approvalId !== "" && typeof a.allow === "boolean" &&
      typeof a.mac === "string" && a.mac.length === 64 &&
      crypto.timingSafeEqual(Buffer.from(a.mac), Buffer.from(mac(a.approvalId, a.allow)));
    if (!ok) {
      refused++;
      continue;
    }
    answers.set(a.approvalId, a.allow);
  }
  return { answers, refused };
}

// awaitAnswer polls the answers file until id is answered or the wait
// passes; it resolves to {allow, by}.
function awaitAnswer(id) {
  return new Promise((resolve) => {
    const deadline = Date.now() + policy.wait;
    const tick = () => {
      const { answers, refused } = readAnswers();
      if (refused > refusedSeen) {
        refusedSeen = refused;
        journal({ subtype: "approval_warning", message: refused + " line(s) of the run's answers file are not authenticated answers (written inside the sandbox?): ignored" });
      }
      if (answers.has(id)) return resolve({ allow: answers.get(id), by: "answer" });
      if (Date.now() >= deadline) return resolve({ allow: policy.default === "allow", by: "deadline" });
      setTimeout(tick, Math.max(10, Math.min(policy.poll || 250, deadline - Date.now())));
    };
    tick();
  });
}

async function approve(args) {
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
    if (live()) {
      const toolUseId = args && typeof args.tool_use_id === "string" ? args.tool_use_id : "";
      journal({ subtype: "approval_waiting", approval_id: id, kind: d.kind, target: d.target, tool_use_id: toolUseId, wait: policy.waitText || "" });
      const a = await awaitAnswer(id);
      journal({ subtype: "approval_answered", approval_id: id, allowed: a.allow, by: a.by, tool_use_id: toolUseId });
      if (a.allow) return { behavior: "allow", updatedInput: input };
      if (a.by === "deadline") return { behavior: "deny", message: "Denied: approval " + id + " was not given in time." };
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
      approve(p.arguments || {}).then(
        (r) => reply(msg.id, { content: [{ type: "text", text: JSON.stringify(r) }] }),
        (e) => reply(msg.id, { content: [{ type: "text", text: JSON.stringify({ behavior: "deny", message: "corral's permission tool failed: " + e }) }] }),
      );
      return;
    }
    default:
      if (isRequest) reply(msg.id, null, { code: -32601, message: "method not found: " + (msg && msg.method) });
  }
});
