// The official @upstash/box SDK against the fake: UPSTASH_BOX_BASE_URL
// and UPSTASH_BOX_API_KEY point it there (the SDK reads both). Prints one
// JSON object of what it saw; the Go test compares it.
import { Box } from "@upstash/box";

const out = {};
const box = await Box.create({ runtime: "node", size: "small", name: "sdk-check", env: { SDK_VAR: "from-create" } });
out.created = box.id.startsWith("box_");
const byName = await Box.get("sdk-check");
out.getByName = byName.id === box.id;
out.status = (await box.getStatus()).status;

const run = await box.exec.command("echo hello; echo oops >&2; exit 3");
out.command = { exitCode: run.exitCode, stdout: run.stdout, stderr: run.stderr };

const stream = await box.exec.stream("for i in 1 2 3; do echo line$i; done");
let streamed = "";
for await (const chunk of stream) if (chunk.type === "output") streamed += chunk.data;
out.stream = { output: streamed, exitCode: stream.exitCode };

await box.files.write({ path: "dir/a.txt", content: "file content\n" });
out.file = await box.files.read("dir/a.txt");
out.list = (await box.files.list("dir")).map((f) => `${f.name}:${f.is_dir}:${f.size}`);

const bg = await box.exec.command("sleep 300 >/dev/null 2>&1 & echo $!");
const pid = bg.stdout.trim();
// A killed process may stay a zombie until its reaper runs: alive means
// running or sleeping.
const live = `grep -qs '^State:[[:space:]]*[RSD]' /proc/${pid}/status`;
const kill = await box.exec.command(`kill ${pid}; i=0; while [ $i -lt 50 ] && ${live}; do sleep 0.1; i=$((i+1)); done; ${live} && echo alive || echo gone`);
out.kill = kill.stdout.trim();

const snap = await box.snapshot({ name: "sdk-snap" });
out.snapshot = snap.status;
const restored = await Box.fromSnapshot(snap.id, { name: "sdk-restored" });
out.restored = await restored.files.read("dir/a.txt");
await restored.delete();
await box.deleteSnapshot(snap.id);
out.snapshotsAfter = (await box.listSnapshots()).length;

const pv = await box.getPublicURL(3000, { bearerToken: true });
out.preview = { port: pv.port, hasToken: Boolean(pv.token), url: pv.url.includes("-3000.preview.box.upstash.com") };

await box.pause();
out.paused = (await box.getStatus()).status;
await box.resume();
out.resumed = (await box.getStatus()).status;

await box.delete();
try {
  await Box.get(box.id);
  out.destroy = "still there";
} catch (e) {
  out.destroy = `${e.name}:${e.statusCode}`;
}
try {
  await Box.get("x", { apiKey: "wrong-key" });
} catch (e) {
  out.badKey = `${e.name}:${e.statusCode}:${e.message}`;
}
console.log(JSON.stringify(out));
