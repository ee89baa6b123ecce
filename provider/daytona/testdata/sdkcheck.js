// sdkcheck.js: drives the official @daytonaio/sdk against the Daytona fake
// the way a user would. Run by TestOfficialSDK with node; the SDK is found
// through NODE_PATH ($CORRAL_AGENTS_DIR/node_modules). DAYTONA_API_URL and
// DAYTONA_API_KEY point it at the fake. Prints one JSON line of results;
// any SDK error fails (exit 1).
'use strict'
const { Daytona } = require('@daytonaio/sdk')

async function main() {
  const out = { steps: [] }
  const step = (name, v) => out.steps.push(name) && (out[name] = v)
  // Event streaming (socket.io) is Daytona's own push channel, which the
  // fake does not serve: the SDK's documented polling mode is used.
  const daytona = new Daytona({ apiKey: process.env.DAYTONA_API_KEY, apiUrl: process.env.DAYTONA_API_URL, useDeprecatedPolling: true })
  const sb = await daytona.create({ name: 'sdk-check', language: 'typescript', labels: { corral: '1', via: 'sdk' }, autoStopInterval: 0, networkBlockAll: true })
  step('create', { id: sb.id, name: sb.name, state: sb.state, toolbox: sb.toolboxProxyUrl })
  const got = await daytona.get('sdk-check')
  step('getByName', got.id === sb.id)

  const listed = []
  for await (const x of daytona.list({ labels: { via: 'sdk' } })) listed.push(x.id)
  step('list', listed.length === 1 && listed[0] === sb.id)

  const workDir = await sb.getWorkDir()
  step('workDir', workDir)
  step('homeDir', await sb.getUserHomeDir())
  const r = await sb.process.executeCommand('echo hello; echo oops >&2; exit 3', workDir)
  step('execute', { exitCode: r.exitCode, result: r.result })

  await sb.process.createSession('s1')
  const cmd = await sb.process.executeSessionCommand('s1', { command: 'for i in 1 2 3; do echo line$i; sleep 0.1; done; echo err >&2', runAsync: true })
  let so = '', se = ''
  await sb.process.getSessionCommandLogs('s1', cmd.cmdId, (c) => { so += c }, (c) => { se += c })
  const st = await sb.process.getSessionCommand('s1', cmd.cmdId)
  step('stream', { stdout: so, stderr: se, exitCode: st.exitCode })

  const sync = await sb.process.executeSessionCommand('s1', { command: 'printf out; printf err >&2; exit 4' })
  step('sessionSync', { exitCode: sync.exitCode, stdout: sync.stdout, stderr: sync.stderr })
  const sess = await sb.process.getSession('s1')
  step('getSession', sess.commands.length)

  // A background command, killed by its process group from a second
  // command (the SDK has no kill of its own for session commands).
  await sb.process.createSession('bg')
  const bg = await sb.process.executeSessionCommand('bg', { command: 'setsid sh -c \'echo $$ > bg.pid; (while :; do echo . >> hb; sleep 0.1; done) & wait\'', runAsync: true })
  let pid = ''
  for (let i = 0; i < 100 && !pid; i++) {
    await new Promise((r) => setTimeout(r, 50))
    const p = await sb.process.executeCommand('cat bg.pid 2>/dev/null', workDir)
    pid = p.result.trim()
  }
  const k = await sb.process.executeCommand(`kill -9 -${pid}; sleep 0.3; a=$(wc -c < hb); sleep 0.5; b=$(wc -c < hb); [ "$a" = "$b" ] && echo gone || echo alive`, workDir)
  let bgExit
  for (let i = 0; i < 100 && bgExit === undefined; i++) {
    bgExit = (await sb.process.getSessionCommand('bg', bg.cmdId)).exitCode
    if (bgExit === undefined) await new Promise((r) => setTimeout(r, 50))
  }
  step('kill', { group: k.result.trim(), exitCode: bgExit })
  await sb.process.deleteSession('bg')
  await sb.process.deleteSession('s1')

  const dir = workDir + '/sdk'
  await sb.fs.createFolder(dir, '755')
  await sb.fs.uploadFile(Buffer.from('file content\n'), dir + '/a.txt')
  const data = await sb.fs.downloadFile(dir + '/a.txt')
  step('file', data.toString())
  const ls = await sb.fs.listFiles(dir)
  step('listFiles', ls.map((f) => `${f.name}:${f.isDir}:${f.size}`))
  const info = await sb.fs.getFileDetails(dir + '/a.txt')
  await sb.fs.deleteFile(dir + '/a.txt')
  step('fileInfoDelete', { size: info.size, left: (await sb.fs.listFiles(dir)).length })

  const pv = await sb.getPreviewLink(8080)
  step('preview', { url: pv.url, hasToken: !!pv.token })
  const spv = await sb.getSignedPreviewUrl(8080, 60)
  step('signedPreview', !!spv.url)

  await sb.createSnapshot('sdk-check-snap')
  step('snapshot', sb.state)
  // by name: the SDK resolves it (GET /snapshots/{name}) and deletes by id
  await daytona.snapshot.delete('sdk-check-snap')
  step('deleteSnapshot', true)

  await sb.stop()
  await sb.start()
  step('stopStart', sb.state)

  // An egress allow-list as corral sends it: the SDK passes both lists,
  // the fake answers them back; a list entry with a port is a 400.
  const nw = await daytona.create({ name: 'sdk-check-net', language: 'typescript', networkAllowList: '203.0.113.7/32', domainAllowList: 'api.anthropic.com,*.npmjs.org' })
  step('allowLists', { networkAllowList: nw.networkAllowList, domainAllowList: nw.domainAllowList })
  await nw.delete()
  let badList = ''
  try { await daytona.create({ name: 'sdk-check-badnet', language: 'typescript', domainAllowList: 'db.example.com:5432' }) } catch (e) { badList = `${e.constructor.name}:${e.statusCode}` }
  step('badAllowList', badList)

  await sb.delete()
  let goneErr = ''
  try { await daytona.get(sb.id) } catch (e) { goneErr = `${e.constructor.name}:${e.statusCode}` }
  step('destroy', goneErr)
  process.stdout.write(JSON.stringify(out) + '\n')
  process.exit(0)
}

main().catch((e) => {
  process.stderr.write(`sdkcheck: ${e && e.stack ? e.stack : e}\n`)
  process.exit(1)
})
