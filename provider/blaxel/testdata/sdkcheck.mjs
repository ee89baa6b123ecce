// sdkcheck.mjs: drives the official @blaxel/core against the Blaxel fake
// the way a user would. Run by TestOfficialSDK with node; the SDK is
// resolved from SDK_DIR ($CORRAL_AGENTS_DIR/node_modules/@blaxel/core).
// The SDK is pointed at the fake by its own settings: BL_API_URL (the
// control plane's root), BL_API_KEY and BL_WORKSPACE (the auth headers),
// BL_DISABLE_H2=true and no region (no HTTP/2 pool to the region's edge
// domain); each sandbox's own API is the metadata.url the fake returns.
// Prints one JSON line of results; any unexpected SDK error fails (exit 1).
import { pathToFileURL } from 'node:url'
import path from 'node:path'

const { SandboxInstance } = await import(pathToFileURL(path.join(process.env.SDK_DIR, 'dist', 'esm', 'index.js')).href)

let requests = 0
const realFetch = globalThis.fetch
globalThis.fetch = (...a) => { requests++; return realFetch(...a) }

const out = { steps: [], requests: {} }
const step = (name, v) => { out.steps.push(name); out[name] = v; process.stderr.write(`sdkcheck: ${name}\n`) }
const count = async (name, fn) => { const before = requests; const v = await fn(); out.requests[name] = requests - before; return v }
const errOf = async (fn) => { try { await fn(); return 'no error' } catch (e) { return `${e.code ?? e.status ?? e.name}:${typeof e.error === 'string' ? e.error : ''}` } }

const sb = await count('create', () => SandboxInstance.createIfNotExists({ name: 'sdk-check', image: 'blaxel/base-image:latest', memory: 2048, ttl: '1h', labels: { 'corral-create-attempt': 'sdk' } }))
step('create', { name: sb.metadata.name, status: sb.status, ttl: sb.spec.runtime.ttl, label: sb.metadata.labels['corral-create-attempt'] })
const again = await SandboxInstance.createIfNotExists({ name: 'sdk-check', labels: { 'corral-create-attempt': 'other' } })
step('createIfNotExists', again.metadata.labels['corral-create-attempt'])
step('conflict', await errOf(() => SandboxInstance.create({ name: 'sdk-check' })))
const got = await SandboxInstance.get('sdk-check')
step('get', got.status)

const r = await count('exec', () => sb.process.exec({ command: 'echo hello; echo oops >&2; exit 3', waitForCompletion: true }))
step('exec', { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, status: r.status })
const root = (await sb.process.exec({ command: 'pwd', waitForCompletion: true })).stdout.trim()

let so = '', se = ''
const streamed = await sb.process.exec({ command: 'for i in 1 2 3; do echo line$i; sleep 0.1; done; echo err >&2', waitForCompletion: true, onStdout: (l) => { so += l }, onStderr: (l) => { se += l } })
step('stream', { stdout: so, stderr: se, exitCode: streamed.exitCode })

const bgLogs = []
await sb.process.exec({ command: 'echo started; sleep 0.2; echo later', name: 'logger' })
const logs = sb.process.streamLogs('logger', { onStdout: (l) => bgLogs.push(l) })
await logs.wait()
step('streamLogs', bgLogs)

await count('write', () => sb.fs.write(`${root}/a.txt`, 'file content\n'))
step('file', await count('read', () => sb.fs.read(`${root}/a.txt`)))
await sb.fs.writeBinary(`${root}/bin.dat`, new Uint8Array([0, 255, 1, 128]))
step('binary', Array.from(new Uint8Array(await (await sb.fs.readBinary(`${root}/bin.dat`)).arrayBuffer())))
await sb.fs.mkdir(`${root}/sub`)
const ls = await sb.fs.ls(root)
step('list', { files: ls.files.map((f) => f.name).sort(), dirs: ls.subdirectories.map((d) => d.name) })
await sb.fs.rm(`${root}/a.txt`)
step('missing', await errOf(() => sb.fs.read(`${root}/a.txt`)))

await sb.process.exec({ command: `sleep 30 & echo $! > ${root}/child.pid; wait`, name: 'bg' })
for (let i = 0; i < 50; i++) { try { if ((await sb.fs.read(`${root}/child.pid`)).trim()) break } catch {} await new Promise((res) => setTimeout(res, 50)) }
await sb.process.kill('bg')
const killed = await sb.process.wait('bg', { maxWait: 10000, interval: 100 })
const child = (await sb.fs.read(`${root}/child.pid`)).trim()
// The group's SIGKILL is delivered at once but acted on when the grandchild
// next runs: it is given up to 5 s to be gone (a hang guard, not a time).
const probe = await sb.process.exec({ command: `i=0; while :; do s=$(cut -d' ' -f3 /proc/${child}/stat 2>/dev/null); case "$s" in ''|Z) echo gone; break;; esac; [ $i -ge 100 ] && { echo running; break; }; i=$((i+1)); sleep 0.05; done`, waitForCompletion: true })
step('kill', { status: killed.status, marker: killed.stdout.includes('[Process is being forcefully killed]'), grandchild: probe.stdout.trim() })

const pv = await sb.previews.createIfNotExists({ metadata: { name: 'web' }, spec: { port: 3000, public: false } })
const tok = await pv.tokens.create(new Date(Date.now() + 3600_000))
step('preview', { port: pv.spec.port, public: pv.spec.public, token: tok.value.startsWith('bl_pt_') })

await count('delete', () => sb.delete())
step('destroy', await errOf(() => SandboxInstance.get('sdk-check')))
process.stdout.write(JSON.stringify(out) + '\n')
