// sdkcheck.mjs: the official e2b SDK (npm e2b, pinned in
// scripts/setup-agents.sh) against the loopback fake. The SDK is pointed at
// it with its own connection options: apiUrl (E2B_API_URL) for the control
// plane and sandboxUrl (E2B_SANDBOX_URL) for envd, which then routes by the
// E2b-Sandbox-Id header, as it does at sandbox.e2b.app. Prints one JSON
// line per step; exits non-zero on the first failure.
//
// usage: node sdkcheck.mjs <path to the e2b package's dist/index.mjs>
const { Sandbox } = await import(process.argv[2]);

const opts = { apiKey: process.env.E2B_API_KEY, apiUrl: process.env.E2B_API_URL, sandboxUrl: process.env.E2B_SANDBOX_URL, requestTimeoutMs: 30000 };
const step = (name, detail) => console.log(JSON.stringify({ step: name, ...detail }));
const fail = (msg) => { console.error('sdkcheck: ' + msg); process.exit(1); };
const only = process.env.SDKCHECK_ONLY; // one operation, for the request count

if (only) {
  const sbx = await Sandbox.create('base', { ...opts, metadata: { sdk: 'bench' } });
  const marks = [];
  const mark = async (name, fn) => { await fetch(process.env.E2B_API_URL + '/_mark/' + name).catch(() => {}); await fn(); };
  await mark('exec', () => sbx.commands.run('echo hi'));
  await mark('write', () => sbx.files.write('bench.txt', 'x'.repeat(1024)));
  await mark('read', () => sbx.files.read('bench.txt'));
  await mark('end', async () => {});
  await sbx.kill();
  process.exit(0);
}

const sbx = await Sandbox.create('base', { ...opts, timeoutMs: 120000, metadata: { corral: 'sdkcheck' } });
step('create', { id: sbx.sandboxId });

const info = await Sandbox.getInfo(sbx.sandboxId, opts);
if (info.metadata.corral !== 'sdkcheck' || info.state !== 'running') fail('getInfo: ' + JSON.stringify(info));
step('getInfo', { state: info.state });

const r = await sbx.commands.run('echo out; echo err >&2; exit 0');
if (r.exitCode !== 0 || r.stdout !== 'out\n' || r.stderr !== 'err\n') fail('run: ' + JSON.stringify(r));
let code = -1;
try { await sbx.commands.run('exit 3'); } catch (e) { code = e.exitCode; }
if (code !== 3) fail('exit code: ' + code);
step('run', { stdout: r.stdout, exitCode: 3 });

const chunks = [];
const h = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.05; done', { background: true, onStdout: (d) => chunks.push(d) });
const hr = await h.wait();
if (chunks.join('') !== 'line1\nline2\nline3\n' || hr.exitCode !== 0) fail('stream: ' + JSON.stringify(chunks));
step('stream', { chunks: chunks.length });

const withIn = await sbx.commands.run('cat', { background: true, stdin: true });
await sbx.commands.sendStdin(withIn.pid, 'piped\n');
await sbx.commands.closeStdin(withIn.pid);
const wi = await withIn.wait();
if (wi.stdout !== 'piped\n') fail('stdin: ' + JSON.stringify(wi));
step('stdin', { stdout: wi.stdout });

await sbx.files.makeDir('sdkdir');
await sbx.files.write('sdkdir/a.txt', 'hello from the sdk');
const text = await sbx.files.read('sdkdir/a.txt');
if (text !== 'hello from the sdk') fail('read: ' + text);
const list = await sbx.files.list('sdkdir');
if (list.length !== 1 || list[0].name !== 'a.txt' || list[0].type !== 'file') fail('list: ' + JSON.stringify(list));
if (!(await sbx.files.exists('sdkdir/a.txt'))) fail('exists');
step('files', { read: text, list: list.map((e) => e.name) });

const bg = await sbx.commands.run('sleep 300', { background: true });
const procs = await sbx.commands.list();
if (!procs.some((p) => p.pid === bg.pid)) fail('list processes: ' + JSON.stringify(procs));
if (!(await sbx.commands.kill(bg.pid))) fail('kill returned false');
let killed;
try { killed = await bg.wait(); } catch (e) { killed = e; }
step('kill', { pid: bg.pid, exitCode: killed.exitCode });

const snap = await sbx.createSnapshot();
if (!snap.snapshotId) fail('snapshot: ' + JSON.stringify(snap));
const snaps = await sbx.listSnapshots().nextItems();
if (!snaps.some((s) => s.snapshotId === snap.snapshotId)) fail('listSnapshots: ' + JSON.stringify(snaps));
const fromSnap = await Sandbox.create(snap.snapshotId, opts);
const again = await fromSnap.files.read('sdkdir/a.txt');
if (again !== 'hello from the sdk') fail('restored file: ' + again);
await fromSnap.kill();
if (!(await Sandbox.deleteSnapshot(snap.snapshotId, opts))) fail('deleteSnapshot returned false');
step('snapshot', { id: snap.snapshotId, listed: snaps.length });

const forks = await sbx.fork({ timeoutMs: 60000 });
if (forks.length !== 1 || !(forks[0] instanceof Sandbox)) fail('fork: ' + String(forks[0]));
const forked = await forks[0].files.read('sdkdir/a.txt');
if (forked !== 'hello from the sdk' || forks[0].sandboxId === sbx.sandboxId) fail('forked file: ' + forked);
await forks[0].kill();
step('fork', { id: forks[0].sandboxId });

await sbx.updateNetwork({ allowInternetAccess: false });
step('network', {});

await sbx.setTimeout(60000);
await sbx.pause();
const resumed = await Sandbox.connect(sbx.sandboxId, opts);
const after = await resumed.files.read('sdkdir/a.txt');
if (after !== 'hello from the sdk') fail('after resume: ' + after);
step('pause-connect', {});

const page = await Sandbox.list({ ...opts, query: { metadata: { corral: 'sdkcheck' } } }).nextItems();
if (page.length !== 1 || page[0].sandboxId !== sbx.sandboxId) fail('list: ' + JSON.stringify(page));
step('list', { n: page.length });

await sbx.kill();
let gone = false;
try { await Sandbox.getInfo(sbx.sandboxId, opts); } catch (e) { gone = e.name === 'SandboxNotFoundError' || /not found/i.test(e.message); }
if (!gone) fail('getInfo after kill did not say not found');
step('destroy', {});
console.log('sdkcheck: ok');
