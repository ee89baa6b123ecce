// sdkcheck.mjs drives the official `railway` SDK (pinned in
// scripts/setup-agents.sh) against the Railway fake: the Go test
// TestOfficialSDK runs it with node (--experimental-websocket on node 20),
// RAILWAY_API_TOKEN, RAILWAY_ENVIRONMENT_ID, RAILWAY_GRAPHQL_ENDPOINT and
// RAILWAY_TCP_PROXY_WS_ENDPOINT pointing at the fake, and NODE_PATH at the
// SDK. It prints one "ok <step>" line per step and exits non-zero on the
// first failure.
import { pathToFileURL } from "node:url";
const { Sandbox } = await import(pathToFileURL(process.env.SDK_DIR + "/dist/index.js").href);

const ok = (s) => console.log("ok " + s);
const fail = (s) => { console.error("FAIL " + s); process.exit(1); };
const eq = (got, want, what) => { if (got !== want) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`); };

const sb = await Sandbox.create({ idleTimeoutMinutes: 10, env: { GREETING: "hi" } });
if (!sb.id || sb.status !== "RUNNING") fail("create: " + JSON.stringify(sb.toJSON()));
ok("create " + sb.id);

const again = await Sandbox.connect(sb.id);
eq(again.id, sb.id, "connect id");
ok("connect");

const r = await sb.exec("echo out; echo err >&2; exit 3", { env: { X: "y" } });
eq(r.exitCode, 3, "exit code"); eq(r.stdout, "out\n", "stdout"); eq(r.stderr, "err\n", "stderr");
ok("exec");

const e = await sb.exec('printf %s "$X"', { env: { X: "from-init-frame" } });
eq(e.stdout, "from-init-frame", "env in init frame");
eq((await sb.exec('printf %s "$GREETING"')).stdout, "hi", "create-time env (variables) in every command");
ok("exec env");

const chunks = [];
const st = await sb.exec("for i in 1 2 3; do echo line$i; sleep 0.05; done", { onStdout: (c) => chunks.push(c) });
eq(st.exitCode, 0, "stream exit"); eq(chunks.join(""), "line1\nline2\nline3\n", "streamed output");
ok("stream " + chunks.length + " chunks");

const home = (await sb.exec('printf %s "$HOME"')).stdout;
const dir = home + "/workspace/sdk";
await sb.files.write(dir + "/a.txt", "hello railway");
eq(await sb.files.read(dir + "/a.txt"), "hello railway", "read back");
const bytes = new Uint8Array(200000).map((_, i) => i % 251);
await sb.files.write(dir + "/b.bin", bytes, { mode: 0o600 });
const back = await sb.files.read(dir + "/b.bin", { format: "bytes" });
eq(back.length, bytes.length, "binary length");
for (let i = 0; i < back.length; i++) if (back[i] !== bytes[i]) fail("binary byte " + i);
ok("write/read");

const names = (await sb.files.list(dir)).map((x) => x.name).sort();
eq(names.join(","), "a.txt,b.bin", "list");
const s = await sb.files.stat(dir + "/b.bin");
eq(s.size, 200000, "stat size"); eq(s.mode & 0o777, 0o600, "mode");
eq(await sb.files.exists(dir + "/nope"), false, "exists");
await sb.files.mkdir(dir + "/x/y");
await sb.files.rename(dir + "/a.txt", dir + "/x/y/c.txt");
await sb.files.remove(dir + "/b.bin");
eq((await sb.files.list(dir)).map((x) => x.name).join(","), "x", "list after");
ok("list/stat/mkdir/rename/remove");

const bg = sb.exec("sleep 60 & echo $! > /tmp/sdkcheck-child-$$; echo started; wait");
const t0 = Date.now();
await new Promise((res) => setTimeout(res, 300));
await bg.kill("TERM");
const killed = await bg;
eq(killed.exitCode, -1, "killed exit code");
ok(`kill background (exit ${killed.exitCode}, ${Date.now() - t0} ms)`);

const cpName = "sdkcheck-" + sb.id.slice(0, 8);
const cp = await sb.checkpoint(cpName);
eq(cp.key, cpName, "checkpoint key");
const restored = await Sandbox.create(cpName);
const rhome = (await restored.exec('printf %s "$HOME"')).stdout;
if (rhome === home) fail("restored sandbox shares the source's home");
eq(await restored.files.read(rhome + "/workspace/sdk/x/y/c.txt"), "hello railway", "restored file");
ok("checkpoint " + cp.id + " restored");
const list = await Sandbox.checkpoints();
if (!list.some((c) => c.key === cpName)) fail("checkpoints list");
await Sandbox.deleteCheckpoint(cp.id);
ok("checkpoints list/delete");

const fork = await sb.fork();
if (fork.id === sb.id) fail("fork id");
const fhome = (await fork.exec('printf %s "$HOME"')).stdout;
eq(await fork.files.read(fhome + "/workspace/sdk/x/y/c.txt"), "hello railway", "forked file");
ok("fork " + fork.id);

for (const x of [restored, fork, sb]) await x.destroy();
try { await Sandbox.connect(sb.id); fail("connect after destroy succeeded"); }
catch (err) { eq(err.name, "SandboxNotFoundError", "connect after destroy"); }
ok("destroy");
