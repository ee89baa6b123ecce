// A stdio MCP server for tests: newline-delimited JSON-RPC 2.0 on stdin
// and stdout. It offers one tool whose name says the server's name (argv
// [2]) and whose description carries a digest of $CORRAL_PROBE_TOKEN, so a
// test can see from the model's request that the agent started the server
// with the secret in its environment, without the secret itself showing.
"use strict";
const crypto = require("crypto");
const readline = require("readline");

const name = process.argv[2] || "probe";
const token = process.env.CORRAL_PROBE_TOKEN || "";
const digest = token ? crypto.createHash("sha256").update(token).digest("hex").slice(0, 16) : "none";
const tool = {
  name: "probe_" + name,
  description: "corral probe tool; token digest " + digest,
  inputSchema: { type: "object", properties: {} },
};

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\n");
}

readline.createInterface({ input: process.stdin }).on("line", (line) => {
  let req;
  try {
    req = JSON.parse(line);
  } catch {
    return;
  }
  if (req.id === undefined) return; // a notification
  switch (req.method) {
    case "initialize":
      send({
        jsonrpc: "2.0",
        id: req.id,
        result: {
          protocolVersion: (req.params && req.params.protocolVersion) || "2025-06-18",
          capabilities: { tools: { listChanged: false } },
          serverInfo: { name: "corral-probe", version: "1.0.0" },
        },
      });
      break;
    case "tools/list":
      send({ jsonrpc: "2.0", id: req.id, result: { tools: [tool] } });
      break;
    case "tools/call":
      send({ jsonrpc: "2.0", id: req.id, result: { content: [{ type: "text", text: "probed " + digest }] } });
      break;
    case "ping":
      send({ jsonrpc: "2.0", id: req.id, result: {} });
      break;
    default:
      send({ jsonrpc: "2.0", id: req.id, error: { code: -32601, message: "method not found: " + req.method } });
  }
});
