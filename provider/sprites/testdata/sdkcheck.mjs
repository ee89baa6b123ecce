// sdkcheck.mjs: drives the official @fly/sprites SDK against the Sprites
// fake the way a user would. Run by TestOfficialSDK with node; the SDK is
// imported from SPRITES_SDK (the package's dist/index.js under
// $CORRAL_AGENTS_DIR/node_modules). SPRITES_API_URL and SPRITES_API_KEY
// point it at the fake: the SDK takes the API URL as its baseURL option
// and derives the exec WebSocket's ws:// URL from it. Prints one JSON
// line of results; any SDK error fails (exit 1).
const { SpritesClient, ExecError, APIError } = await import(process.env.SPRITES_SDK)

const out = { steps: [] }
const step = (name, v) => { out.steps.push(name); out[name] = v }
const client = new SpritesClient(process.env.SPRITES_API_KEY, { baseURL: process.env.SPRITES_API_URL })

const sprite = await client.createSprite('sdk-check', { labels: ['corral', 'via-sdk'], urlSettings: { auth: 'public' } })
step('create', { name: sprite.name, status: sprite.status, labels: sprite.labels, auth: sprite.urlSettings?.auth, hasURL: !!sprite.url })
const got = await client.getSprite('sdk-check')
const list = await client.listSprites({ prefix: 'sdk' })
step('get', { id: got.id === sprite.id, listed: list.sprites.map((s) => s.name) })

const home = (await sprite.execFile('sh', ['-c', 'printf %s "$HOME"'])).stdout
let failed
try {
  await sprite.execFile('sh', ['-c', 'echo hello; echo oops >&2; exit 3'])
} catch (e) {
  if (!(e instanceof ExecError)) throw e
  failed = { exitCode: e.exitCode, stdout: e.stdout, stderr: e.stderr }
}
step('exec', failed)

// env= replaces the default environment: PATH is gone unless passed.
const env = await sprite.execFile('/bin/sh', ['-c', 'printf %s "$FOO:$PATH"'], { env: { FOO: 'bar' }, cwd: home })
step('env', env.stdout)

const stream = await new Promise((resolve, reject) => {
  const cmd = sprite.spawn('sh', ['-c', 'for i in 1 2 3; do echo line$i; sleep 0.1; done; echo err >&2'])
  let so = '', se = ''
  cmd.stdout.on('data', (c) => { so += c })
  cmd.stderr.on('data', (c) => { se += c })
  cmd.on('error', reject)
  cmd.wait().then((code) => setImmediate(() => resolve({ stdout: so, stderr: se, exitCode: code })))
})
step('stream', stream)

const piped = await new Promise((resolve, reject) => {
  const cmd = sprite.spawn('cat', [])
  let so = ''
  cmd.stdout.on('data', (c) => { so += c })
  cmd.on('error', reject)
  cmd.on('spawn', () => { cmd.stdin.write('piped\n'); cmd.stdin.end() })
  cmd.wait().then((code) => setImmediate(() => resolve({ stdout: so, exitCode: code })))
})
step('stdin', piped)

const fsys = sprite.filesystem(home)
await fsys.writeFile('sdk/a.txt', 'file content\n')
step('file', await fsys.readFile('sdk/a.txt', 'utf8'))
const ents = await fsys.readdir('sdk', { withFileTypes: true })
step('list', ents.map((e) => `${e.name}:${e.isDirectory()}`))
await fsys.rename('sdk/a.txt', 'sdk/b.txt')
step('stat', (await fsys.stat('sdk/b.txt')).size)
await fsys.rm('sdk/b.txt')
step('gone', await fsys.exists('sdk/b.txt'))

// A background command killed through the session kill endpoint; the
// heartbeat of its backgrounded child stops (the kill reaches the group).
const bg = sprite.spawn('sh', ['-c', '(while :; do echo . >> hb; sleep 0.1; done) & wait'], { cwd: home })
const bgExit = bg.wait()
await new Promise((r) => bg.on('spawn', r))
let session
for (let i = 0; i < 100 && !session; i++) {
  session = (await sprite.listSessions()).find((s) => s.command.includes('hb'))
  if (!session) await new Promise((r) => setTimeout(r, 50))
}
const events = []
for await (const ev of await sprite.killSession(String(session.id), 'SIGTERM', '1s')) events.push(ev.type)
const frozen = await sprite.execFile('sh', ['-c', 'a=$(wc -c < hb); sleep 0.5; b=$(wc -c < hb); [ "$a" = "$b" ] && echo gone || echo alive'], { cwd: home })
step('kill', { events, group: frozen.stdout.trim(), exitCode: await bgExit })

// Checkpoint, change, restore in place; reads fail for a moment after.
await fsys.writeFile('state.txt', 'checkpointed')
const msgs = []
for await (const m of await sprite.createCheckpoint('sdk-check')) msgs.push(m.type)
const cps = await sprite.listCheckpoints()
await fsys.writeFile('state.txt', 'changed')
for await (const m of await sprite.restoreCheckpoint(cps[0].id)) msgs.push(m.type)
let restored, readFailures = 0
for (let i = 0; i < 20 && restored === undefined; i++) {
  try { restored = await fsys.readFile('state.txt', 'utf8') } catch (e) { readFailures++ }
}
step('checkpoint', { id: cps[0].id, comment: cps[0].comment, restored, readFailures, msgs })

await sprite.delete()
let goneErr = ''
try { await client.getSprite('sdk-check') } catch (e) { goneErr = `${e instanceof APIError ? 'APIError' : e.name}:${e.statusCode}` }
step('destroy', goneErr)
process.stdout.write(JSON.stringify(out) + '\n')
process.exit(0)
