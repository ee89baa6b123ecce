// sdkcount.mjs counts the requests the official `railway` SDK makes for
// corral's four measured operations (create, exec, write, read) against
// the Railway fake: every fetch (a GraphQL call) and every WebSocket
// opened (an exec or files socket) is counted. Run by TestRequestCounts
// with the same variables as sdkcheck.mjs; it prints one JSON line.
import { pathToFileURL } from "node:url";

let n = 0;
const realFetch = globalThis.fetch;
globalThis.fetch = (...a) => { n++; return realFetch(...a); };
const RealWS = globalThis.WebSocket;
globalThis.WebSocket = class extends RealWS { constructor(...a) { super(...a); n++; } };

const { Sandbox } = await import(pathToFileURL(process.env.SDK_DIR + "/dist/index.js").href);
const count = async (f) => { const before = n; await f(); return n - before; };

let sb;
const out = {};
out.create = await count(async () => { sb = await Sandbox.create({}); });
out.mkdir = await count(() => sb.files.mkdir("/tmp/sdkcount-ws"));
out.exec = await count(() => sb.exec("echo hi"));
out.write = await count(() => sb.files.write("/tmp/sdkcount-ws/f.txt", "data"));
out.read = await count(() => sb.files.read("/tmp/sdkcount-ws/f.txt"));
// Cold: a fresh handle (Sandbox.connect, not counted) has no files
// socket open yet, as corral's handle has none to reuse.
const cold1 = await Sandbox.connect(sb.id);
out.coldWrite = await count(() => cold1.files.write("/tmp/sdkcount-ws/g.txt", "data"));
const cold2 = await Sandbox.connect(sb.id);
out.coldRead = await count(() => cold2.files.read("/tmp/sdkcount-ws/g.txt"));
await sb.destroy();
console.log(JSON.stringify(out));
process.exit(0);
