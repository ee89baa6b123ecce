// sdkcheck.mjs: drives the official @vercel/sandbox against the Vercel
// fake the way a user would. Run by TestOfficialSDK with node; the SDK is
// resolved from SDK_DIR ($CORRAL_AGENTS_DIR/node_modules/@vercel/sandbox).
// The SDK has no base-URL option: its API client always builds
// https://vercel.com/api/..., and every entry point takes a `fetch`
// (what Vercel's own @vercel/sandbox-mock injects), so the script passes a
// fetch that sends the same request to VERCEL_FAKE_URL instead. Token,
// team and project are given explicitly (never an OIDC token). Prints one
// JSON line of results; any SDK error fails (exit 1).
import { pathToFileURL } from 'node:url'
import path from 'node:path'

const { Sandbox, Snapshot } = await import(pathToFileURL(path.join(process.env.SDK_DIR, 'dist', 'index.js')).href)
const base = process.env.VERCEL_FAKE_URL
let requests = 0
const fetchToFake = (url, init = {}) => {
  requests++
  const u = String(url).replace(/^https:\/\/vercel\.com\/api/, base)
  const { dispatcher, ...rest } = init // the SDK's own undici Agent
  return fetch(u, rest)
}
const creds = { token: process.env.VERCEL_TOKEN, teamId: process.env.VERCEL_TEAM_ID, projectId: process.env.VERCEL_PROJECT_ID, fetch: fetchToFake }

const out = { steps: [], requests: {} }
const step = (name, v) => { out.steps.push(name); out[name] = v; process.stderr.write(`sdkcheck: ${name}\n`) }
const count = async (name, fn) => { const before = requests; const v = await fn(); out.requests[name] = requests - before; return v }

const sb = await count('create', () => Sandbox.create({ ...creds, name: 'sdk-check', runtime: 'node22', ports: [3000], timeout: 600000, persistent: true, tags: { corral: '1' } }))
step('create', { name: sb.name, status: sb.status, runtime: sb.runtime, persistent: sb.persistent })
const got = await Sandbox.get({ ...creds, name: 'sdk-check' })
step('getByName', got.name === sb.name && got.status === 'running')
step('domain', sb.domain(3000))

const r = await count('exec', () => sb.runCommand({ cmd: 'sh', args: ['-c', 'echo hello; echo oops >&2; exit 3'] }))
step('exec', { exitCode: r.exitCode, stdout: await r.stdout(), stderr: await r.stderr() })

const d = await sb.runCommand({ cmd: 'sh', args: ['-c', 'for i in 1 2 3; do echo line$i; sleep 0.1; done; echo err >&2'], detached: true })
let so = '', se = ''
for await (const l of d.logs()) { if (l.stream === 'stdout') so += l.data; else se += l.data }
const fin = await d.wait()
step('stream', { stdout: so, stderr: se, exitCode: fin.exitCode })

await count('write', () => sb.writeFiles([{ path: 'sdk/a.txt', content: Buffer.from('file content\n') }]))
const buf = await count('read', () => sb.readFileToBuffer({ path: 'sdk/a.txt' }))
step('file', buf.toString())
step('missing', await sb.readFileToBuffer({ path: 'sdk/nope.txt' }))
step('list', await sb.fs.readdir('sdk'))
let mk = ''
try { await sb.mkDir('sdk') } catch (e) { mk = `${e.response?.status}:${e.json?.error?.message}` }
step('mkdirExists', mk)
await sb.mkDir('sdk/sub')

// A background command whose work is a grandchild; the SDK's kill
// signals the command.
const bg = await sb.runCommand({ cmd: 'sh', args: ['-c', '(while :; do echo . >> hb; sleep 0.1; done) >/dev/null 2>&1 & echo $! > gc.pid; wait'], detached: true })
await new Promise((res) => setTimeout(res, 400))
await bg.kill('SIGKILL')
const bgDone = await bg.wait()
const probe = await sb.runCommand({ cmd: 'sh', args: ['-c', 'a=$(wc -c < hb); sleep 0.5; b=$(wc -c < hb); kill -9 $(cat gc.pid) 2>/dev/null; [ "$a" = "$b" ] && echo stopped || echo running'] })
step('kill', { exitCode: bgDone.exitCode, grandchild: (await probe.stdout()).trim() })

const snap = await sb.snapshot()
step('snapshot', { status: snap.status, sandboxStatus: sb.status })
// The snapshot stopped the session; the next call resumes (persistent).
const after = await sb.runCommand({ cmd: 'cat', args: ['sdk/a.txt'] })
step('resumed', (await after.stdout()) === 'file content\n')
const restored = await Sandbox.create({ ...creds, name: 'sdk-check-restored', source: { type: 'snapshot', snapshotId: snap.snapshotId } })
const rr = await restored.runCommand({ cmd: 'cat', args: ['sdk/a.txt'] })
step('restore', await rr.stdout())
await restored.delete()
await snap.delete()

// An egress allow-list as corral sends it: the SDK converts it
// (toAPINetworkPolicy), the fake answers the custom form, and the SDK
// reads it back (fromAPINetworkPolicy). A domain with a port is refused.
const np = await Sandbox.create({ ...creds, name: 'sdk-check-policy', networkPolicy: { allow: ['api.anthropic.com', '*.npmjs.org'], subnets: { allow: ['203.0.113.7/32'] } } })
step('networkPolicy', np.networkPolicy)
await np.delete()
let badPolicy = ''
try { await Sandbox.create({ ...creds, name: 'sdk-check-badpolicy', networkPolicy: { allow: ['db.example.com:5432'] } }) } catch (e) { badPolicy = `${e.constructor.name}:${e.response?.status}` }
step('badPolicy', badPolicy)

await sb.stop()
await sb.delete()
let gone = ''
try { await Sandbox.get({ ...creds, name: 'sdk-check' }) } catch (e) { gone = `${e.constructor.name}:${e.response?.status}` }
step('destroy', gone)
process.stdout.write(JSON.stringify(out) + '\n')
process.exit(0)
