// corral's client for `opencode serve` (the opencode harness's server
// mode), run by node inside the sandbox as `node serve-client.js CONFIG`.
// It starts the server on a free loopback port with a password of its own
// (OPENCODE_SERVER_PASSWORD, random, never in argv or on stdout), creates
// or resumes the session, subscribes to the server's event stream, sends
// the prompt read from stdin, and writes every server event it receives to
// stdout as one JSON line: that is the run's journal. Lines of its own have
// types starting with "corral.". A permission.asked is answered with the
// policy corral compiled into CONFIG (OpenCode's own rules,
// last-match-wins): allow → "once", deny → "reject" with a message (the
// model goes on), ask → "reject" (the turn ends) and a corral.permission
// line that makes the translator request an approval. With cfg.live (the
// approvalWait option) an ask waits instead, with the turn, for an answer
// in the run's answers file (harness.AnswersFile; each line's HMAC checked
// with the run's answer key, read from cfg.live.keyFile and unlinked at
// start): the corral.permission line says it waits, a
// corral.permission_answered line says how it was settled (an answer, or
// at the deadline the policy's default, an ask default denying), and the
// permission is answered "once" or "reject" with a message (the model goes
// on in the same turn). Lines the key does not authenticate count for
// nothing and are reported as corral.warning. It exits 0 when the
// session goes idle after the prompt, 1 on a session error, and stops the
// server it started on exit. With cfg.warm (option warm=true) it starts no
// server: it connects to the thread's kept server (cfg.warm.dir holds its
// pid, URL and password; the harness's Prepare started it), marks the turn
// busy while it runs, leaves the server running at its end, and kills the
// server's whole session when it is signalled (a cancel) or finds the
// server dead (then the turn fails). No dependencies.
"use strict";
const { spawn } = require("child_process");
const http = require("http");
const crypto = require("crypto");
const fs = require("fs");

const cfg = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));

// Live answers: the key is read once and its file removed, so the agent
// (same uid) finds no key to forge answers with.
const live = cfg.live && cfg.live.wait > 0 ? cfg.live : null;
let answerKey = null;
if (live) {
  try {
    answerKey = Buffer.from(fs.readFileSync(live.keyFile, "utf8").trim(), "hex");
  } catch (e) {}
  try {
    fs.unlinkSync(live.keyFile);
  } catch (e) {}
  if (!answerKey || answerKey.length === 0) answerKey = null;
}

function emit(type, properties) {
  process.stdout.write(JSON.stringify({ type, properties }) + "\n");
}

emit("corral.client", { mode: "server", version: 1 });

let server = null;
let exiting = false;

// The thread's kept server (cfg.warm): its pid, and the busy file that
// names this client while its turn runs.
const warm = cfg.warm && cfg.warm.dir && cfg.warm.pid > 0 ? cfg.warm : null;
const busyFile = warm ? warm.dir + "/busy" : "";

// alive is the keeper check's test: the process exists and is no zombie.
function alive(pid) {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return false;
  }
  try {
    const st = fs.readFileSync("/proc/" + pid + "/stat", "utf8");
    const state = st.slice(st.lastIndexOf(")") + 2, st.lastIndexOf(")") + 3);
    return state !== "Z" && state !== "X";
  } catch (e) {
    return true;
  }
}

// unbusy removes the busy file if it still names this client.
function unbusy() {
  if (!warm) return;
  try {
    if (fs.readFileSync(busyFile, "utf8").trim() === String(process.pid)) fs.unlinkSync(busyFile);
  } catch (e) {}
}

// killKept kills the kept server's whole session (it leads it: setsid).
function killKept() {
  if (!warm) return;
  for (const target of [-warm.pid, warm.pid]) {
    try {
      process.kill(target, "SIGKILL");
    } catch (e) {}
  }
}

function stopServer() {
  return new Promise((resolve) => {
    if (!server || server.exitCode !== null || server.signalCode !== null) return resolve();
    const timer = setTimeout(() => {
      try {
        server.kill("SIGKILL");
      } catch (e) {}
      resolve();
    }, 3000);
    server.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    try {
      server.kill("SIGTERM");
    } catch (e) {
      clearTimeout(timer);
      resolve();
    }
  });
}

async function finish(code) {
  if (exiting) return;
  exiting = true;
  await stopServer();
  unbusy();
  process.stdout.write("", () => process.exit(code));
}

function fail(message) {
  emit("corral.error", { message: String(message) });
  finish(1);
}

for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"]) {
  process.on(sig, () => {
    killKept();
    unbusy();
    if (server) {
      try {
        server.kill("SIGKILL");
      } catch (e) {}
    }
    process.exit(128 + (sig === "SIGINT" ? 2 : sig === "SIGHUP" ? 1 : 15));
  });
}
process.on("exit", () => {
  unbusy();
  if (server && server.exitCode === null && server.signalCode === null) {
    try {
      server.kill("SIGKILL");
    } catch (e) {}
  }
});

// --- policy --------------------------------------------------------------

// wildcard is OpenCode's pattern match: "*" any text, "?" one character,
// and a trailing " *" also matches nothing.
function wildcard(str, pattern) {
  let re = String(pattern).replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".");
  if (re.endsWith(" .*")) re = re.slice(0, -3) + "( .*)?";
  return new RegExp("^" + re + "$", "s").test(String(str));
}

const policy = cfg.policy || {};
const rules = Array.isArray(policy.rules) ? policy.rules : [];

// evaluate is the last matching rule's action, or the default.
function evaluate(permission, pattern) {
  let action = policy.default || "ask";
  for (const r of rules) {
    if (wildcard(permission, r.permission) && wildcard(pattern, r.pattern)) action = r.action;
  }
  return action;
}

function decide(req) {
  const patterns = Array.isArray(req.patterns) && req.patterns.length ? req.patterns : ["*"];
  const actions = patterns.map((p) => evaluate(req.permission, p));
  if (actions.includes("deny")) return "deny";
  if (actions.includes("ask")) return "ask";
  return "allow";
}

// --- HTTP ----------------------------------------------------------------

let base = "";
let password = crypto.randomBytes(24).toString("base64url");
let authorization = "Basic " + Buffer.from("opencode:" + password).toString("base64");

function url(p) {
  const u = new URL(p, base);
  if (cfg.directory) u.searchParams.set("directory", cfg.directory);
  return u;
}

// The node http module, not fetch: a process's first fetch loads its
// implementation (about 100 ms), which every turn would pay.
const agent = new http.Agent({ keepAlive: true });

// request sends one request and resolves to the response (not yet read).
function request(method, p, headers, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url(p), { method, agent, headers: Object.assign({ authorization }, headers) }, resolve);
    req.on("error", reject);
    req.end(body);
  });
}

async function call(method, p, body) {
  const data = body === undefined ? undefined : JSON.stringify(body);
  const res = await request(method, p, data === undefined ? {} : { "content-type": "application/json" }, data);
  res.setEncoding("utf8");
  let text = "";
  for await (const chunk of res) text += chunk;
  if (res.statusCode < 200 || res.statusCode > 299) throw new Error(method + " " + p + ": " + res.statusCode + " " + text.slice(0, 500));
  return text ? JSON.parse(text) : null;
}

// --- server --------------------------------------------------------------

function startServer() {
  return new Promise((resolve, reject) => {
    const env = Object.assign({}, process.env, { OPENCODE_SERVER_PASSWORD: password });
    delete env.OPENCODE_SERVER_USERNAME;
    const args = ["serve", "--port", "0", "--hostname", "127.0.0.1"].concat(cfg.args || []);
    server = spawn(cfg.executable || "opencode", args, { env, stdio: ["ignore", "pipe", "inherit"] });
    let buf = "";
    let found = false;
    const timer = setTimeout(() => reject(new Error("opencode serve printed no address within 120s")), 120000);
    server.on("error", (e) => {
      clearTimeout(timer);
      reject(new Error("cannot start " + (cfg.executable || "opencode") + ": " + e.message));
    });
    server.on("exit", (code, signal) => {
      clearTimeout(timer);
      if (!found) reject(new Error("opencode serve exited (" + (signal || code) + ") before listening"));
      else if (!exiting) fail("opencode serve exited (" + (signal || code) + ")");
    });
    server.stdout.on("data", (d) => {
      if (found) {
        process.stderr.write(d);
        return;
      }
      buf += d.toString("utf8");
      const m = buf.match(/listening on (https?:\/\/[^\s]+)/);
      if (m) {
        found = true;
        clearTimeout(timer);
        process.stderr.write(buf);
        resolve(m[1].replace(/\/+$/, "") + "/");
      }
    });
  });
}

// attachServer connects to the thread's kept server: the one the keeper
// check found (its pid file still names cfg.warm.pid) and alive. It marks
// the turn busy, watches the server and resolves to its URL.
function attachServer() {
  const read = (name) => fs.readFileSync(warm.dir + "/" + name, "utf8").trim();
  let pid = "";
  try {
    pid = read("pid");
  } catch (e) {}
  if (pid !== String(warm.pid) || !alive(warm.pid)) throw new Error("the warm opencode server " + warm.pid + " is gone");
  fs.writeFileSync(busyFile, process.pid + "\n", { mode: 0o600 });
  password = read("password");
  authorization = "Basic " + Buffer.from("opencode:" + password).toString("base64");
  const u = read("url");
  setInterval(() => {
    if (!exiting && !alive(warm.pid)) fail("the warm opencode server " + warm.pid + " exited");
  }, 200).unref();
  return u.replace(/\/+$/, "") + "/";
}

// --- events --------------------------------------------------------------

let session = "";
let prompted = false;
let busy = false;
let failed = false;

// --- live answers ----------------------------------------------------------

// calls are the tool parts seen, by call id: what an approval id is made of.
const calls = new Map();

const editTools = new Set(["edit", "write", "apply_patch", "patch", "multiedit"]);

// approvalId is the id the translator gives the request (opencode's
// approval(): the call's command, file or URL, else the tool or the
// permission).
function approvalId(req) {
  const c = req.tool && req.tool.callID ? calls.get(req.tool.callID) : null;
  if (!c) return "opencode:tool:" + (req.permission || "tool");
  const input = c.input && typeof c.input === "object" ? c.input : {};
  if (c.tool === "bash" && input.command) return "opencode:command:" + input.command;
  if (editTools.has(c.tool) && input.filePath) return "opencode:fileWrite:" + input.filePath;
  if (c.tool === "webfetch" && input.url) return "opencode:network:" + input.url;
  return "opencode:tool:" + c.tool;
}

function mac(id, allow) {
  return crypto.createHmac("sha256", answerKey).update("corral-answer\x00" + id + "\x00" + String(allow)).digest("hex");
}

let refusedSeen = 0;

function readAnswers() {
  let text = "";
  try {
    text = fs.readFileSync(live.answers, "utf8");
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
// passes: {allow, by}.
function awaitAnswer(id) {
  return new Promise((resolve) => {
    const deadline = Date.now() + live.wait;
    const tick = () => {
      if (exiting) return resolve({ allow: false, by: "cancelled" });
      const { answers, refused } = readAnswers();
      if (refused > refusedSeen) {
        refusedSeen = refused;
        emit("corral.warning", { message: refused + " line(s) of the run's answers file are not authenticated answers (written inside the sandbox?): ignored" });
      }
      if (answers.has(id)) return resolve({ allow: answers.get(id), by: "answer" });
      if (Date.now() >= deadline) return resolve({ allow: policy.default === "allow", by: "deadline" });
      setTimeout(tick, Math.max(10, Math.min(live.poll || 250, deadline - Date.now())));
    };
    tick();
  });
}

async function answer(req) {
  const decision = decide(req);
  const waits = decision === "ask" && live !== null && answerKey !== null;
  const line = {
    id: req.id, sessionID: req.sessionID, permission: req.permission, patterns: req.patterns,
    tool: req.tool, decision,
  };
  let id = "";
  if (waits) {
    id = approvalId(req);
    line.approvalId = id;
    line.wait = live.waitText || "";
  }
  emit("corral.permission", line);
  let body = decision === "allow" ? { reply: "once" }
    : decision === "deny" ? { reply: "reject", message: "Denied by the sandbox policy." }
    : { reply: "reject" };
  if (waits) {
    const a = await awaitAnswer(id);
    emit("corral.permission_answered", { id: req.id, approvalId: id, allowed: a.allow, by: a.by, tool: req.tool });
    body = a.allow ? { reply: "once" }
      : { reply: "reject", message: "Denied: approval " + id + (a.by === "deadline" ? " was not given in time." : " was refused.") };
  }
  try {
    await call("POST", "/permission/" + encodeURIComponent(req.id) + "/reply", body);
  } catch (e) {
    emit("corral.error", { message: "answering permission " + req.id + ": " + e.message });
  }
}

function onEvent(ev) {
  if (!ev || typeof ev !== "object") return;
  process.stdout.write(JSON.stringify(ev) + "\n");
  const p = ev.properties || {};
  if (ev.type === "message.part.updated" && p.part && p.part.type === "tool" && p.part.callID) {
    // As the translator reads a call: its input once it runs.
    const st = p.part.state || {};
    const prev = calls.get(p.part.callID);
    const known = ["running", "completed", "error"].includes(st.status) && st.input && typeof st.input === "object";
    calls.set(p.part.callID, { tool: p.part.tool || "tool", input: known ? st.input : prev ? prev.input : {} });
  }
  switch (ev.type) {
    case "permission.asked":
      answer(p);
      return;
    case "session.status":
      if (p.sessionID === session && prompted && p.status && p.status.type === "busy") busy = true;
      if (p.sessionID === session && busy && p.status && p.status.type === "idle") finish(failed ? 1 : 0);
      return;
    case "session.idle":
      if (p.sessionID === session && busy) finish(failed ? 1 : 0);
      return;
    case "session.error":
      if (!p.sessionID || p.sessionID === session) failed = true;
      return;
  }
}

// subscribe reads the server's event stream (server-sent events) and
// resolves once it is connected.
function subscribe() {
  return new Promise((resolve, reject) => {
    (async () => {
      const res = await request("GET", "/event", { accept: "text/event-stream" });
      if (res.statusCode !== 200) throw new Error("GET /event: " + res.statusCode);
      res.setEncoding("utf8");
      let buf = "";
      let data = [];
      for await (const chunk of res) {
        buf += chunk;
        let i;
        while ((i = buf.indexOf("\n")) >= 0) {
          let line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.endsWith("\r")) line = line.slice(0, -1);
          if (line === "") {
            if (data.length) {
              let ev = null;
              try {
                ev = JSON.parse(data.join("\n"));
              } catch (e) {
                emit("corral.error", { message: "unreadable server event" });
              }
              data = [];
              onEvent(ev);
              if (ev && ev.type === "server.connected") resolve();
            }
          } else if (line.startsWith("data:")) {
            data.push(line.slice(5).replace(/^ /, ""));
          }
        }
      }
      if (!exiting) fail("the server's event stream ended");
    })().catch((e) => {
      reject(e);
      if (!exiting) fail("event stream: " + e.message);
    });
  });
}

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on("data", (c) => chunks.push(c));
    process.stdin.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    process.stdin.on("error", reject);
  });
}

async function main() {
  const prompt = await readStdin();
  base = warm ? attachServer() : await startServer();
  // The session and the event stream are asked for at once; no event of
  // the session comes before its prompt.
  const subscribed = subscribe();
  subscribed.catch(() => {});
  if (cfg.session) {
    try {
      const s = await call("GET", "/session/" + encodeURIComponent(cfg.session));
      session = s.id;
    } catch (e) {
      throw new Error("Session not found: " + cfg.session + " (" + e.message + ")");
    }
  } else {
    const s = await call("POST", "/session", {});
    session = s.id;
  }
  emit("corral.session", { sessionID: session, resumed: !!cfg.session });
  await subscribed;
  const body = { parts: [{ type: "text", text: prompt }] };
  if (cfg.model && cfg.model.providerID && cfg.model.modelID) body.model = cfg.model;
  if (cfg.agent) body.agent = cfg.agent;
  prompted = true;
  await call("POST", "/session/" + encodeURIComponent(session) + "/prompt_async", body);
}

main().catch((e) => fail(e && e.message ? e.message : e));
