// check.js: corral's AG-UI conformance checker, run by the Go tests
// (internal/aguitest) with node, NODE_PATH pointing at the node_modules
// scripts/setup-agents.sh fills. No build step.
//
//   node check.js verify FILE   FILE: {"runs":[{"name":…,"events":[…]}]}
//   node check.js drive FILE    FILE: {"url":…,"token":…,"steps":[…]}
//
// verify checks every event (frame) against @ag-ui/core's EventSchemas and
// against what @ag-ui/client's enforceEvents would strip as unrecognised,
// then each run's events as a whole with @ag-ui/client's verifyEvents.
// drive runs the official HttpAgent.runAgent for each step against a corral
// daemon and records what it received. Both print one JSON object.
"use strict";

const fs = require("fs");
const { EventSchemas } = require("@ag-ui/core/schemas");
const client = require("@ag-ui/client");
const rxjs = require("rxjs");

// warnings captures console.warn while fn runs (enforceEvents reports
// stripped material that way).
async function withWarnings(fn) {
  const seen = [];
  const orig = console.warn;
  console.warn = (...a) => seen.push(a.map(String).join(" "));
  try {
    const value = await fn();
    return { value, seen };
  } finally {
    console.warn = orig;
  }
}

async function checkFrame(ev) {
  const r = EventSchemas.safeParse(ev);
  if (!r.success) {
    return r.error.issues.map((i) => `${i.path.join(".") || "(event)"}: ${i.message}`).join("; ");
  }
  const { seen } = await withWarnings(() =>
    rxjs.lastValueFrom(rxjs.of(ev).pipe(client.enforceEvents(false)), { defaultValue: null }),
  );
  const stripped = seen.filter((w) => /Removed unrecognised material|Dropping unrecognised event/.test(w));
  return stripped.length ? stripped.join("; ") : "";
}

async function checkRun(events) {
  try {
    await rxjs.lastValueFrom(rxjs.from(events).pipe(client.verifyEvents(false)), { defaultValue: null });
    return "";
  } catch (e) {
    return String(e && e.message ? e.message : e);
  }
}

async function verify(input) {
  const out = { frames: 0, framesPassed: 0, runs: 0, runsPassed: 0, failures: [] };
  for (const run of input.runs) {
    out.runs++;
    let ok = true;
    for (const [i, ev] of run.events.entries()) {
      out.frames++;
      const why = await checkFrame(ev);
      if (why) {
        ok = false;
        out.failures.push({ run: run.name, index: i, type: ev && ev.type, why });
      } else {
        out.framesPassed++;
      }
    }
    const why = run.events.length === 0 ? "the run has no events" : await checkRun(run.events);
    if (why) {
      ok = false;
      out.failures.push({ run: run.name, index: -1, type: "verifyEvents", why });
    }
    if (ok) out.runsPassed++;
  }
  return out;
}

// drive runs each step with HttpAgent.runAgent. A step: {agent: name (one
// HttpAgent per name, so interrupts carry over), threadId, runId, prompt,
// forwardedProps, resume, abortAfter: n (abort the request after n events),
// headers}.
async function drive(input) {
  const agents = new Map();
  const results = [];
  for (const step of input.steps) {
    let agent = agents.get(step.agent);
    if (!agent) {
      agent = new client.HttpAgent({
        url: input.url,
        threadId: step.threadId,
        headers: { Authorization: `Bearer ${input.token}`, ...(step.headers || {}) },
      });
      agents.set(step.agent, agent);
    }
    if (step.prompt !== undefined) {
      agent.addMessage({ id: `user-${results.length + 1}`, role: "user", content: step.prompt });
    }
    const res = { events: [], error: "", newMessages: [], pendingInterrupts: [] };
    const abortController = new AbortController();
    const { value, seen } = await withWarnings(async () => {
      try {
        const r = await agent.runAgent(
          { runId: step.runId, forwardedProps: step.forwardedProps, resume: step.resume, abortController },
          {
            onEvent: ({ event }) => {
              res.events.push(event);
              if (step.abortAfter && res.events.length >= step.abortAfter) abortController.abort();
            },
          },
        );
        return r;
      } catch (e) {
        res.error = String(e && e.message ? e.message : e);
        return null;
      }
    });
    res.warnings = seen;
    if (value) res.newMessages = value.newMessages;
    res.pendingInterrupts = agent.pendingInterrupts || [];
    results.push(res);
  }
  return { steps: results };
}

(async () => {
  const [mode, file] = process.argv.slice(2);
  const input = JSON.parse(fs.readFileSync(file, "utf8"));
  const out = mode === "drive" ? await drive(input) : await verify(input);
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(2);
});
