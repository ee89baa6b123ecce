// corral's Cloudflare bridge: a Worker that exports the Sandbox Durable
// Object of @cloudflare/sandbox and serves the authenticated HTTP +
// WebSocket API that corral's Go provider (provider/cloudflare) calls.
// bridge/README.md is the API's specification; provider/cloudflare/
// cloudflarefake is its fake, and the two must stay in step.
import { getSandbox, parseSSEStream, type ExecEvent, type Sandbox as SandboxDO } from '@cloudflare/sandbox';
import { DurableObject } from 'cloudflare:workers';

export { Sandbox } from '@cloudflare/sandbox';

// The main module may export only handlers and classes (workerd refuses
// anything else, as wrangler dev showed), so the helpers live in shell.ts.
import { commandLine } from './shell';

/** The bridge's version, reported by GET /v1/health. */
const VERSION = '0.1.0';

export interface Env {
  Sandbox: DurableObjectNamespace<SandboxDO>;
  CorralIndex: DurableObjectNamespace<CorralIndex>;
  /** The bearer token (wrangler secret put BRIDGE_TOKEN). */
  BRIDGE_TOKEN?: string;
  /** The workspace directory in each container. Default /workspace. */
  WORKDIR?: string;
}

/** A sandbox as the bridge records it. */
export interface SandboxRecord {
  id: string;
  labels: Record<string, string>;
  root: string;
  createdAt: string;
}

const ID_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TAG_STDIN = 0;
const TAG_STDOUT = 1;
const TAG_STDERR = 2;
const MAX_FRAME = 64 << 10;
const MAX_STDIN = 32 << 20;

/**
 * CorralIndex is the one Durable Object (named "index") that records which
 * sandboxes exist: Cloudflare has no list of a namespace's objects, and a
 * Sandbox object is addressable whether or not it was ever created.
 */
export class CorralIndex extends DurableObject<Env> {
  /** add records rec unless its id is taken; false when it is. */
  async add(rec: SandboxRecord): Promise<boolean> {
    const key = 'sb:' + rec.id;
    if ((await this.ctx.storage.get(key)) !== undefined) return false;
    await this.ctx.storage.put(key, rec);
    return true;
  }
  async find(id: string): Promise<SandboxRecord | null> {
    return ((await this.ctx.storage.get<SandboxRecord>('sb:' + id)) ?? null);
  }
  async remove(id: string): Promise<boolean> {
    return this.ctx.storage.delete('sb:' + id);
  }
  async all(): Promise<SandboxRecord[]> {
    const out: SandboxRecord[] = [];
    for (const rec of (await this.ctx.storage.list<SandboxRecord>({ prefix: 'sb:' })).values()) out.push(rec);
    return out;
  }
}

function index(env: Env): DurableObjectStub<CorralIndex> {
  return env.CorralIndex.get(env.CorralIndex.idFromName('index'));
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } });
}

function error(status: number, code: string, message: string): Response {
  return json(status, { error: code, message, status });
}

/** authorized compares the bearer token in constant time. */
function authorized(req: Request, env: Env): boolean {
  const want = env.BRIDGE_TOKEN ?? '';
  const got = req.headers.get('authorization') ?? '';
  if (want === '' || !got.startsWith('Bearer ')) return false;
  const a = new TextEncoder().encode(got.slice(7));
  const b = new TextEncoder().encode(want);
  if (a.byteLength !== b.byteLength) return false;
  return crypto.subtle.timingSafeEqual(a, b);
}

export default {
  async fetch(req: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    try {
      return await route(req, env, ctx);
    } catch (e) {
      return error(502, 'sandbox_error', e instanceof Error ? e.message : String(e));
    }
  },
} satisfies ExportedHandler<Env>;

async function route(req: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  if (!authorized(req, env)) return error(401, 'unauthorized', 'missing or bad bearer token');
  const url = new URL(req.url);
  const parts = url.pathname.split('/').filter((p) => p !== '');
  if (parts[0] !== 'v1') return error(404, 'not_found', 'no route ' + url.pathname);
  const root = env.WORKDIR || '/workspace';

  if (parts.length === 2 && parts[1] === 'health' && req.method === 'GET') {
    return json(200, { ok: true, bridge: 'corral-cloudflare-bridge', version: VERSION });
  }
  if (parts[1] !== 'sandboxes') return error(404, 'not_found', 'no route ' + url.pathname);

  if (parts.length === 2) {
    if (req.method === 'POST') return create(req, env, root);
    if (req.method === 'GET') return list(url, env);
    return error(405, 'method_not_allowed', req.method + ' ' + url.pathname);
  }
  const id = decodeURIComponent(parts[2]);
  const rec = await index(env).find(id);
  if (rec === null) return error(404, 'not_found', 'sandbox ' + JSON.stringify(id) + ' not found');
  const sandbox = getSandbox(env.Sandbox, id);

  if (parts.length === 3) {
    if (req.method === 'GET') return json(200, rec);
    if (req.method === 'DELETE') {
      await sandbox.destroy();
      await index(env).remove(id);
      return new Response(null, { status: 204 });
    }
    return error(405, 'method_not_allowed', req.method + ' ' + url.pathname);
  }
  if (parts.length === 4 && parts[3] === 'env' && req.method === 'POST') {
    const body = (await req.json().catch(() => null)) as { env?: Record<string, string> } | null;
    if (body === null || typeof body.env !== 'object' || body.env === null) {
      return error(400, 'bad_request', 'want {"env": {NAME: value}}');
    }
    for (const [k, v] of Object.entries(body.env)) {
      if (!ENV_NAME_RE.test(k) || typeof v !== 'string') return error(400, 'bad_request', 'bad variable ' + JSON.stringify(k));
    }
    await sandbox.setEnvVars(body.env);
    return new Response(null, { status: 204 });
  }
  if (parts.length === 4 && parts[3] === 'exec' && req.method === 'GET') {
    if (req.headers.get('upgrade')?.toLowerCase() !== 'websocket') {
      return error(426, 'upgrade_required', 'exec is a WebSocket');
    }
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    server.accept();
    ctx.waitUntil(exec(server, sandbox, rec));
    return new Response(null, { status: 101, webSocket: client });
  }
  return error(404, 'not_found', 'no route ' + url.pathname);
}

async function create(req: Request, env: Env, root: string): Promise<Response> {
  const body = (await req.json().catch(() => null)) as { id?: unknown; labels?: unknown } | null;
  if (body === null || typeof body.id !== 'string' || !ID_RE.test(body.id)) {
    return error(400, 'bad_request', 'want {"id": 1-63 of a-z, 0-9 and -, "labels": {...}}');
  }
  const labels: Record<string, string> = {};
  if (body.labels !== undefined) {
    if (typeof body.labels !== 'object' || body.labels === null) return error(400, 'bad_request', 'labels must be an object');
    for (const [k, v] of Object.entries(body.labels as Record<string, unknown>)) {
      if (typeof v !== 'string') return error(400, 'bad_request', 'label ' + JSON.stringify(k) + ' is not a string');
      labels[k] = v;
    }
  }
  const rec: SandboxRecord = { id: body.id, labels, root, createdAt: new Date().toISOString() };
  if (!(await index(env).add(rec))) return error(409, 'conflict', 'sandbox ' + JSON.stringify(rec.id) + ' exists');
  try {
    await getSandbox(env.Sandbox, rec.id).mkdir(root, { recursive: true });
  } catch (e) {
    await index(env).remove(rec.id);
    throw e;
  }
  return json(201, rec);
}

async function list(url: URL, env: Env): Promise<Response> {
  const want: [string, string][] = [];
  for (const kv of url.searchParams.getAll('label')) {
    const i = kv.indexOf('=');
    if (i < 0) return error(400, 'bad_request', 'label filter ' + JSON.stringify(kv) + ' is not K=V');
    want.push([kv.slice(0, i), kv.slice(i + 1)]);
  }
  const all = await index(env).all();
  const sandboxes = all.filter((r) => want.every(([k, v]) => r.labels[k] === v)).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return json(200, { sandboxes });
}

interface StartMessage {
  type: 'start';
  argv: string[];
  env?: string[];
  dir?: string;
  stdin?: boolean;
}

/** frames cuts one output chunk into tagged binary messages. */
function send(ws: WebSocket, tag: number, data: Uint8Array): void {
  for (let off = 0; off < data.byteLength; off += MAX_FRAME) {
    const chunk = data.subarray(off, Math.min(off + MAX_FRAME, data.byteLength));
    const msg = new Uint8Array(chunk.byteLength + 1);
    msg[0] = tag;
    msg.set(chunk, 1);
    ws.send(msg);
  }
}

function sendText(ws: WebSocket, m: Record<string, unknown>): void {
  ws.send(JSON.stringify(m));
}

function toBase64(b: Uint8Array): string {
  let s = '';
  for (let i = 0; i < b.byteLength; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * exec runs one command for one WebSocket: start → started, stdin frames
 * and eof (buffered, then staged as a file), output frames, exit. The
 * command is not stopped when the socket closes: the SDK's exec takes no
 * abort over Workers RPC. A kill is a second command (a kill script that
 * signals the group setsid made).
 */
async function exec(ws: WebSocket, sandbox: SandboxDO, rec: SandboxRecord): Promise<void> {
  const messages: (string | ArrayBuffer)[] = [];
  let wake: (() => void) | null = null;
  let closed = false;
  ws.addEventListener('message', (ev) => {
    messages.push(ev.data as string | ArrayBuffer);
    wake?.();
  });
  ws.addEventListener('close', () => {
    closed = true;
    wake?.();
  });
  const next = async (): Promise<string | ArrayBuffer | null> => {
    while (messages.length === 0) {
      if (closed) return null;
      await new Promise<void>((r) => (wake = r));
      wake = null;
    }
    return messages.shift()!;
  };
  const fail = (status: number, message: string) => {
    try {
      sendText(ws, { type: 'error', status, message });
      ws.close(1011, 'error');
    } catch {
      // the socket is gone already
    }
  };

  const first = await next();
  let start: StartMessage;
  try {
    start = JSON.parse(typeof first === 'string' ? first : '') as StartMessage;
  } catch {
    return fail(400, 'the first message must be a start message with argv');
  }
  if (start.type !== 'start' || !Array.isArray(start.argv) || start.argv.length === 0 || !start.argv.every((a) => typeof a === 'string')) {
    return fail(400, 'the first message must be a start message with argv');
  }
  const env: Record<string, string> = {};
  for (const kv of start.env ?? []) {
    const i = kv.indexOf('=');
    if (i <= 0 || !ENV_NAME_RE.test(kv.slice(0, i))) return fail(400, 'bad environment entry');
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  sendText(ws, { type: 'started' });

  let stdinFile: string | null = null;
  if (start.stdin) {
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const m = await next();
      if (m === null) return; // gone before eof: the command never starts
      if (typeof m === 'string') {
        try {
          if ((JSON.parse(m) as { type?: string }).type === 'eof') break;
        } catch {
          // not a message the protocol knows: ignored
        }
        continue;
      }
      const b = new Uint8Array(m);
      if (b.byteLength === 0 || b[0] !== TAG_STDIN) continue;
      size += b.byteLength - 1;
      if (size > MAX_STDIN) return fail(413, 'standard input over ' + MAX_STDIN + ' bytes');
      chunks.push(b.slice(1));
    }
    const all = new Uint8Array(size);
    let off = 0;
    for (const c of chunks) {
      all.set(c, off);
      off += c.byteLength;
    }
    stdinFile = '/tmp/corral-stdin-' + crypto.randomUUID();
    await sandbox.writeFile(stdinFile, toBase64(all), { encoding: 'base64' });
  }

  // execStream, not exec({stream, onOutput}): exec keeps all of the
  // output in the Durable Object's memory until the command ends, which a
  // journal follower streaming for hours would exhaust.
  const enc = new TextEncoder();
  try {
    const stream = await sandbox.execStream(commandLine(start.argv, stdinFile), { cwd: start.dir || rec.root, env });
    let code: number | null = null;
    for await (const ev of parseSSEStream<ExecEvent>(stream)) {
      if (closed) break; // the client is gone: stop reading (the command is not reached)
      if ((ev.type === 'stdout' || ev.type === 'stderr') && ev.data) {
        send(ws, ev.type === 'stdout' ? TAG_STDOUT : TAG_STDERR, enc.encode(ev.data));
      } else if (ev.type === 'complete') {
        code = ev.exitCode ?? ev.result?.exitCode ?? 0;
        break;
      } else if (ev.type === 'error') {
        throw new Error(ev.error || ev.data || 'command execution failed');
      }
    }
    if (!closed && code !== null) {
      sendText(ws, { type: 'exit', code });
      ws.close(1000, '');
    } else if (!closed) {
      fail(502, 'the command stream ended without an exit code');
    }
  } catch (e) {
    // After started, a failure is a transport failure to the client: the
    // socket closes without an exit message.
    if (!closed) fail(502, e instanceof Error ? e.message : String(e));
  }
}
