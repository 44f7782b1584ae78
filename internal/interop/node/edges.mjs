// Edge-case checks of an rpcd server, written from docs/protocol.md alone.
//
//   node interop/node/edges.mjs HOST:PORT
//
// The server must run with default limits and serve exactly the routes of the page's section
// "The routes of `rpcd serve`" (e.g. `go run ./cmd/rpcd serve -addr 127.0.0.1:7171`).
// Prints one line per check, `ok  <name>` or `FAIL <name>: <what happened; what the page says>`,
// and exits 0 only if every check agrees with the page. Standard library only.
// Set VERBOSE=1 to print the GoAway messages and other details the checks see.

import net from 'node:net';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';

const VERBOSE = !!process.env.VERBOSE;
const [host, portText] = (process.argv[2] || '127.0.0.1:7171').split(/:(?=\d+$)/);
const port = Number(portText);

// ---------------------------------------------------------------------------------------------
// The frame ("Frame layout", "Kinds", "Flags", "Codecs", "Metadata")
// ---------------------------------------------------------------------------------------------

const K = {
  Request: 0x01, Response: 0x02, Error: 0x03, OneWay: 0x04, Cancel: 0x05, Ping: 0x06, Pong: 0x07,
  GoAway: 0x08, Subscribe: 0x09, Unsubscribe: 0x0a, Publish: 0x0b, Message: 0x0c,
  Hello: 0x10, Welcome: 0x11,
  StreamOpen: 0x18, StreamData: 0x19, StreamCredit: 0x1a, StreamEnd: 0x1b, StreamReset: 0x1c,
};
const KIND_NAME = Object.fromEntries(Object.entries(K).map(([n, v]) => [v, n]));
const F_UNPROCESSED = 0x01;
const F_GZIP = 0x02;
const F_ZSTD = 0x04;
const RAW = 0x00;
const JSONC = 0x01;
const C = { OK: 0, Canceled: 1, Unknown: 2, InvalidArgument: 3, DeadlineExceeded: 4, NotFound: 5,
  ResourceExhausted: 8, Internal: 13, Unavailable: 14, Unauthenticated: 16 };
const CODE_NAME = Object.fromEntries(Object.entries(C).map(([n, v]) => [v, n]));
const MAX_FRAME = 4 * 1024 * 1024; // "whole frame size | 4 MiB (4,194,304 bytes), header included"
const HDR = 24;

const b = (x) => (Buffer.isBuffer(x) ? x : typeof x === 'string' ? Buffer.from(x, 'utf8') : Buffer.from(x ?? []));
const u32 = (n) => { const x = Buffer.alloc(4); x.writeUInt32BE(n >>> 0); return x; };
const u64 = (n) => { const x = Buffer.alloc(8); x.writeBigUInt64BE(BigInt(n)); return x; };

function encodeMeta(meta) {
  const parts = [];
  for (const [k, v] of meta) {
    const kb = b(k); const vb = b(v);
    parts.push(Buffer.from([kb.length]), kb, Buffer.from([vb.length >> 8, vb.length & 0xff]), vb);
  }
  return Buffer.concat(parts);
}

// Encodes one frame. Every header field can be forced, so that broken frames can be made.
function frame({ kind, flags = 0, codec = RAW, route = '', id = 0, deadline = 0, meta = [], metaRaw,
  payload = Buffer.alloc(0), reserved = 0, magic = [0x52, 0x44], version = 1, payloadLen }) {
  const r = b(route);
  const m = metaRaw !== undefined ? b(metaRaw) : encodeMeta(meta);
  const p = b(payload);
  const h = Buffer.alloc(HDR);
  h[0] = magic[0]; h[1] = magic[1]; h[2] = version; h[3] = kind;
  h[4] = flags; h[5] = codec; h.writeUInt16BE(r.length, 6);
  h.writeUInt32BE(id >>> 0, 8); h.writeUInt32BE(deadline >>> 0, 12);
  h.writeUInt16BE(m.length, 16); h.writeUInt16BE(reserved, 18);
  h.writeUInt32BE(payloadLen ?? p.length, 20);
  return Buffer.concat([h, r, m, p]);
}
const errBody = (code, msg = '') => Buffer.concat([Buffer.from([code >> 8, code & 0xff]), b(msg)]);
const goAwayBody = (last, code, msg = '') => Buffer.concat([u32(last), errBody(code, msg)]);

// A Zstandard frame (RFC 8878) holding data as one Raw block: enough to send zstd without a
// zstd library (Node 20's zlib has none). Single segment, content size in the header.
function zstdRaw(data) {
  const n = data.length; let fhd; let fcs;
  if (n < 256) { fhd = 0x20; fcs = Buffer.from([n]); } else if (n < 65792) { fhd = 0x60; fcs = Buffer.alloc(2); fcs.writeUInt16LE(n - 256); } else { fhd = 0xa0; fcs = Buffer.alloc(4); fcs.writeUInt32LE(n); }
  const bh = Buffer.alloc(3); bh.writeUIntLE(1 | (n << 3), 0, 3); // last block, Raw, size n
  return Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd, fhd]), fcs, bh, data]);
}

const req = (id, route, payload = '', codec = JSONC, extra = {}) =>
  frame({ kind: K.Request, id, route, payload, codec, ...extra });
const ping = (payload = '') => frame({ kind: K.Ping, payload });

function decodeMeta(buf) {
  const out = []; let i = 0;
  while (i < buf.length) {
    const kl = buf[i]; if (kl === 0 || i + 1 + kl + 2 > buf.length) return null;
    const key = buf.subarray(i + 1, i + 1 + kl).toString('latin1'); i += 1 + kl;
    const vl = buf.readUInt16BE(i); i += 2; if (i + vl > buf.length) return null;
    out.push([key, buf.subarray(i, i + vl)]); i += vl;
  }
  return out;
}
const metaGet = (f, key) => { const e = (f.meta || []).find(([k]) => k === key); return e ? e[1].toString('latin1') : undefined; };

// Incremental frame reader: bytes in (any chunking), whole frames out.
class FrameReader {
  constructor() { this.chunks = []; this.len = 0; this.hdr = null; }
  take(n) {
    const first = this.chunks[0];
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift(); else this.chunks[0] = first.subarray(n);
      this.len -= n; return out;
    }
    const out = Buffer.allocUnsafe(n); let off = 0;
    while (off < n) {
      const c = this.chunks[0]; const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      if (k === c.length) this.chunks.shift(); else this.chunks[0] = c.subarray(k);
      off += k;
    }
    this.len -= n; return out;
  }
  push(chunk) {
    this.chunks.push(chunk); this.len += chunk.length;
    const out = [];
    for (;;) {
      if (!this.hdr) {
        if (this.len < HDR) break;
        const h = this.take(HDR);
        this.hdr = {
          magic: h.readUInt16BE(0), version: h[2], kind: h[3], flags: h[4], codec: h[5],
          routeLen: h.readUInt16BE(6), id: h.readUInt32BE(8), deadline: h.readUInt32BE(12),
          metaLen: h.readUInt16BE(16), reserved: h.readUInt16BE(18), payloadLen: h.readUInt32BE(20),
        };
      }
      const hd = this.hdr; const body = hd.routeLen + hd.metaLen + hd.payloadLen;
      if (this.len < body) break;
      const all = body ? this.take(body) : Buffer.alloc(0);
      const metaRaw = all.subarray(hd.routeLen, hd.routeLen + hd.metaLen);
      out.push({ ...hd, route: all.subarray(0, hd.routeLen).toString('latin1'), metaRaw,
        meta: decodeMeta(metaRaw), payload: all.subarray(hd.routeLen + hd.metaLen) });
      this.hdr = null;
    }
    return out;
  }
}

const describe = (f) => {
  if (!f) return String(f);
  if (f.type && f.type !== 'frame') return `<${f.type}${f.err ? ' ' + f.err.code : ''}>`;
  let s = `${KIND_NAME[f.kind] ?? '0x' + f.kind.toString(16)} id=${f.id}`;
  if (f.flags) s += ` flags=0x${f.flags.toString(16)}`;
  if (f.route) s += ` route=${f.route}`;
  if (f.kind === K.Error || f.kind === K.StreamReset) s += ` code=${errCode(f)}(${CODE_NAME[errCode(f)] ?? '?'}) "${f.payload.subarray(2)}"`;
  else if (f.kind === K.GoAway) s += ` last=${f.payload.readUInt32BE(0)} code=${f.payload.readUInt16BE(4)} "${f.payload.subarray(6)}"`;
  else if (f.kind === K.StreamCredit || f.kind === K.StreamOpen) s += ` n=${f.payload.length === 4 ? f.payload.readUInt32BE(0) : '?'}`;
  else if (f.payload.length <= 40) s += ` payload=${JSON.stringify(f.payload.toString('latin1'))}`;
  else s += ` payload=${f.payload.length}B`;
  return s;
};
const errCode = (f) => (f.payload.length >= 2 ? f.payload.readUInt16BE(0) : -1);
const errMsg = (f) => f.payload.subarray(2).toString('utf8');
const isGoAway = (f) => f.type === 'frame' && f.kind === K.GoAway;

// What "Rules per kind" says a frame from the server must hold; violations are failures of
// whatever check saw them.
function ruleViolations(f, conn) {
  const v = [];
  const compression = f.flags & 0x06;
  const rule = {
    [K.Request]: { id: 'pos', route: true, flags: 'comp' },
    [K.Response]: { id: 'pos', flags: 'comp', dl0: true },
    [K.Error]: { id: 'any', raw: true, flags: [0, 1], min: 2, dl0: true },
    [K.OneWay]: { id: 'pos', route: true, flags: 'comp' },
    [K.Cancel]: { id: 'pos', raw: true, flags: [0], max: 0, dl0: true },
    [K.Ping]: { id: 'zero', raw: true, flags: [0], max: 64, dl0: true },
    [K.Pong]: { id: 'zero', raw: true, flags: [0], max: 64, dl0: true },
    [K.GoAway]: { id: 'zero', raw: true, flags: [0], min: 6, dl0: true },
    [K.Unsubscribe]: { id: 'pos', raw: true, flags: [0], dl0: true },
    [K.Message]: { id: 'pos', route: true, flags: 'comp', dl0: true },
    [K.Welcome]: { id: 'zero', raw: true, flags: [0], max: 4096, dl0: true },
    [K.StreamOpen]: { id: 'pos', route: true, flags: [0], len: 4 },
    [K.StreamData]: { id: 'pos', raw: true, flags: 'comp', dl0: true },
    [K.StreamCredit]: { id: 'pos', raw: true, flags: [0], len: 4, dl0: true },
    [K.StreamEnd]: { id: 'pos', raw: true, flags: [0], max: 0, dl0: true },
    [K.StreamReset]: { id: 'pos', raw: true, flags: [0, 1], min: 2, dl0: true },
  }[f.kind];
  if (f.magic !== 0x5244) v.push('bad magic');
  if (f.version !== 1) v.push(`version ${f.version}`);
  if (f.reserved !== 0) v.push('reserved field not 0');
  if (!rule) { v.push(`kind 0x${f.kind.toString(16)} a server does not send`); return v; }
  if (rule.id === 'pos' && f.id === 0) v.push('call id 0');
  if (rule.id === 'zero' && f.id !== 0) v.push('call id not 0');
  if (rule.raw && f.codec !== RAW) v.push(`codec ${f.codec}, page says Raw`);
  if (rule.route ? f.routeLen === 0 : f.routeLen !== 0) v.push(rule.route ? 'no route' : 'a route where none belongs');
  if (rule.dl0 && f.deadline !== 0) v.push('deadline not 0');
  if (rule.flags === 'comp') {
    if (f.flags & ~0x06) v.push(`flags 0x${f.flags.toString(16)}`);
    if (compression === 0x06) v.push('reserved compression 3');
    if (compression && !(conn.tookCompression.has(compression))) v.push('compressed in a compression the client never named');
    if (compression && f.payload.length === 0) v.push('"A compressed payload is never empty" broken');
  } else if (!rule.flags.includes(f.flags)) v.push(`flags 0x${f.flags.toString(16)}`);
  if (rule.min !== undefined && f.payload.length < rule.min) v.push(`payload ${f.payload.length} < ${rule.min}`);
  if (rule.max !== undefined && f.payload.length > rule.max) v.push(`payload ${f.payload.length} > ${rule.max}`);
  if (rule.len !== undefined && f.payload.length !== rule.len) v.push(`payload ${f.payload.length} != ${rule.len}`);
  if (f.routeLen + f.metaLen + f.payloadLen + HDR > MAX_FRAME) v.push('frame over 4 MiB');
  if (f.meta === null) v.push('malformed metadata');
  return v.length ? [`${describe(f)}: ${v.join(', ')}`] : [];
}

// ---------------------------------------------------------------------------------------------
// A connection: a socket, its frame reader and a queue of what arrived.
// Events: {type:'frame', ...frame}, {type:'end'} (the server's FIN), {type:'error', err} (a
// reset or other socket error), {type:'close'}, and {type:'timeout'} from next().
// ---------------------------------------------------------------------------------------------

const allSockets = new Set();

class Conn {
  static open(opts = {}) {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ host, port, allowHalfOpen: true, noDelay: true });
      allSockets.add(sock);
      const t = setTimeout(() => { sock.destroy(); reject(new Error('connect timeout')); }, 10000);
      sock.once('connect', () => { clearTimeout(t); resolve(new Conn(sock, opts)); });
      sock.once('error', (e) => { clearTimeout(t); reject(e); });
    });
  }
  constructor(sock, opts) {
    this.sock = sock; this.reader = new FrameReader(); this.queue = []; this.waiter = null;
    this.violations = []; this.tookCompression = new Set(); this.ended = false; this.error = null;
    this.closed = false; this.onFrame = opts.onFrame || null; this.keep = opts.keep !== false;
    sock.on('data', (d) => {
      for (const f of this.reader.push(d)) {
        f.type = 'frame';
        this.violations.push(...ruleViolations(f, this));
        if (this.onFrame) this.onFrame(f); if (this.keep) this._emit(f);
      }
    });
    sock.on('end', () => { this.ended = true; this._emit({ type: 'end' }); });
    sock.on('error', (err) => { this.error = err; this._emit({ type: 'error', err }); });
    sock.on('close', () => { this.closed = true; allSockets.delete(sock); this._emit({ type: 'close' }); });
  }
  _emit(ev) {
    if (this.waiter) { const w = this.waiter; this.waiter = null; w(ev); } else this.queue.push(ev);
  }
  send(...bufs) { return this.sock.write(bufs.length === 1 ? bufs[0] : Buffer.concat(bufs)); }
  // The next event, or {type:'timeout'}. 'close' is reported only once nothing else is left.
  next(ms = 5000) {
    if (this.queue.length) return Promise.resolve(this.queue.shift());
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.waiter = null; resolve({ type: 'timeout' }); }, ms);
      this.waiter = (ev) => { clearTimeout(t); resolve(ev); };
    });
  }
  // Next frame, skipping nothing: anything that is not a frame is returned as is.
  async frame(ms = 5000) {
    for (;;) { const ev = await this.next(ms); if (ev.type === 'close' && (this.ended || this.error)) continue; return ev; }
  }
  // Reads until the server's FIN, a socket error, or the time is up; returns the frames and how
  // the stream ended: 'fin', 'reset' (ECONNRESET), 'error', 'timeout'.
  async untilEnd(ms = 5000) {
    const frames = []; const deadline = Date.now() + ms;
    for (;;) {
      const ev = await this.next(Math.max(1, deadline - Date.now()));
      if (ev.type === 'frame') frames.push(ev);
      else if (ev.type === 'end') return { frames, end: 'fin' };
      else if (ev.type === 'error') return { frames, end: ev.err.code === 'ECONNRESET' ? 'reset' : `error ${ev.err.code}` };
      else if (ev.type === 'close') { if (this.ended) return { frames, end: 'fin' }; return { frames, end: 'close' }; }
      else if (ev.type === 'timeout') return { frames, end: 'timeout' };
    }
  }
  // Sends a Ping with a fresh payload and returns every frame that came before its Pong.
  async sync(ms = 5000) {
    const tag = `sync-${Math.random().toString(36).slice(2, 10)}`;
    this.send(ping(tag));
    const before = []; const deadline = Date.now() + ms;
    for (;;) {
      const ev = await this.frame(Math.max(1, deadline - Date.now()));
      if (ev.type !== 'frame') throw new Error(`no Pong to a Ping: got ${describe(ev)} after [${before.map(describe).join('; ')}]`);
      if (ev.kind === K.Pong && ev.payload.toString() === tag) return before;
      before.push(ev);
    }
  }
  // Sends and waits for the answer (Response or Error) with this id; other frames are collected.
  async call(id, route, payload = '', codec = JSONC, extra = {}) {
    this.send(req(id, route, payload, codec, extra));
    return this.answer(id);
  }
  async answer(id, ms = 10000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const ev = await this.frame(Math.max(1, deadline - Date.now()));
      if (ev.type !== 'frame') throw new Error(`no answer to call ${id}: ${describe(ev)}`);
      if ((ev.kind === K.Response || ev.kind === K.Error) && ev.id === id) return ev;
      if (ev.kind === K.Ping) { this.send(frame({ kind: K.Pong, payload: ev.payload })); continue; }
      throw new Error(`waiting for the answer to call ${id}, got ${describe(ev)}`);
    }
  }
  end() { this.sock.end(); }
  destroy() { this.sock.destroy(); }
}

// ---------------------------------------------------------------------------------------------
// Running checks
// ---------------------------------------------------------------------------------------------

const results = [];
const CHECK_MS = 30000;

async function check(name, fn) {
  const conns = [];
  const open = async (opts) => { const c = await Conn.open(opts); conns.push(c); return c; };
  let timer;
  const t0 = Date.now();
  try {
    await Promise.race([
      fn(open),
      new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`no outcome within ${CHECK_MS / 1000} s (a hang)`)), CHECK_MS); }),
    ]);
    const v = conns.flatMap((c) => c.violations);
    if (v.length) throw new Error(`the server sent frames that break "Rules per kind": ${v.slice(0, 3).join(' | ')}`);
    results.push(true);
    console.log(`ok  ${name}${VERBOSE ? `  (${Date.now() - t0} ms)` : ''}`);
  } catch (e) {
    results.push(false);
    console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
    if (VERBOSE && e && e.stack) console.log(e.stack.split('\n').slice(1, 4).join('\n'));
  } finally {
    clearTimeout(timer);
    for (const c of conns) c.destroy();
  }
}
const log = (...a) => { if (VERBOSE) console.log('   ', ...a); };
function expect(cond, msg) { if (!cond) throw new Error(msg); }
const fmt = (frames) => `[${frames.map(describe).join('; ')}]`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Expects, from here on: the given frames (predicates) in order, then GoAway(code, last), then the
// end of the stream by FIN. Per "Closing": "writes whatever it owed before the GoAway, then the
// GoAway, then shuts down its write side"; "a peer that gets a GoAway reads it, then the end of
// the stream".
async function expectGoAway(c, { code = C.Internal, last = 0, before = [], what }) {
  const { frames, end } = await c.untilEnd(8000);
  const gi = frames.findIndex((f) => f.kind === K.GoAway);
  const ctx = `${what}: got ${fmt(frames)} then <${end}>`;
  expect(gi >= 0, `${ctx}; the page says a GoAway with code ${code} (${CODE_NAME[code]})`);
  const g = frames[gi];
  log(`${what}: GoAway message: "${g.payload.subarray(6)}"`);
  const pre = frames.slice(0, gi).filter((f) => f.kind !== K.Ping); // a Ping may always come
  expect(pre.length === before.length && before.every((p, i) => p(pre[i])),
    `${ctx}; expected ${before.length} frame(s) before the GoAway`);
  expect(g.payload.readUInt16BE(4) === code, `${ctx}; the page says GoAway code ${code} (${CODE_NAME[code]})`);
  expect(g.payload.readUInt32BE(0) === last, `${ctx}; expected last call id ${last}`);
  expect(gi === frames.length - 1, `${ctx}; frames after the GoAway ("parses nothing more")`);
  expect(end === 'fin', `${ctx}; the page says GoAway then the end of the stream (a FIN, "lingering close"), not <${end}>`);
  return g;
}
const isResp = (id, payload) => (f) => f.kind === K.Response && f.id === id && (payload === undefined || f.payload.toString() === payload);

// Bytes that do not compress (xorshift32).
function noise(n, seed = 2463534242) {
  const out = Buffer.alloc(n); let x = seed >>> 0;
  for (let i = 0; i < n; i++) { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; out[i] = x & 0xff; }
  return out;
}

// Payloads that are distinct per call and cheap to rebuild.
const fill = (id, size) => Buffer.alloc(size, `<call ${id}|`);

// Writes frames as fast as the socket takes them (waiting for 'drain'), while the connection
// reads; resolves when all were handed to the kernel or Node.
async function writeAll(c, frames) {
  for (const f of frames) {
    const fb = typeof f === 'function' ? f() : f;
    if (!c.send(fb)) await new Promise((res, rej) => {
      const onDrain = () => { c.sock.off('close', onClose); res(); };
      const onClose = () => { c.sock.off('drain', onDrain); rej(new Error('socket closed while writing')); };
      c.sock.once('drain', onDrain); c.sock.once('close', onClose);
    });
  }
}

// Pipelined echo: n calls of size bytes on one connection, replies read concurrently.
async function pipelinedEcho(c, n, size, firstId = 1) {
  const got = new Map(); let bad = null;
  c.keep = false;
  const done = new Promise((resolve) => {
    c.onFrame = (f) => {
      if (f.kind === K.Ping) { c.send(frame({ kind: K.Pong, payload: f.payload })); return; }
      if (f.kind !== K.Response) { bad ??= `got ${describe(f)}`; resolve(); return; }
      if (got.has(f.id)) bad ??= `call ${f.id} answered twice`;
      else if (!f.payload.equals(fill(f.id, size))) bad ??= `call ${f.id} answered with other bytes (${f.payload.length} B)`;
      got.set(f.id, true);
      if (got.size === n) resolve();
    };
    c.sock.on('end', resolve); c.sock.on('error', resolve);
  });
  const ids = Array.from({ length: n }, (_, i) => firstId + i);
  const writer = writeAll(c, ids.map((id) => () => req(id, 'Bench/EchoPacket', fill(id, size), RAW)));
  await Promise.all([writer, done]);
  expect(!bad, bad);
  expect(got.size === n, `only ${got.size} of ${n} calls answered before ${c.ended ? 'the server closed' : c.error ? c.error.code : '?'}`);
}

const streamSend = (id, data, flags = 0) => frame({ kind: K.StreamData, id, payload: data, flags });
const streamEnd = (id) => frame({ kind: K.StreamEnd, id });
const streamOpen = (id, route, window, extra = {}) => frame({ kind: K.StreamOpen, id, route, payload: u32(window), ...extra });
const streamCredit = (id, n) => frame({ kind: K.StreamCredit, id, payload: u32(n) });
const streamReset = (id, code, msg = '') => frame({ kind: K.StreamReset, id, payload: errBody(code, msg) });

// Waits for a frame that satisfies pred (answering Pings), failing on anything else that is
// not allowed by allow.
async function waitFor(c, pred, what, allow = () => false, ms = 8000) {
  const deadline = Date.now() + ms; const seen = [];
  for (;;) {
    const ev = await c.frame(Math.max(1, deadline - Date.now()));
    if (ev.type !== 'frame') throw new Error(`${what}: got ${fmt(seen)} then ${describe(ev)}`);
    if (pred(ev)) return ev;
    if (ev.kind === K.Ping) { c.send(frame({ kind: K.Pong, payload: ev.payload })); continue; }
    if (!allow(ev)) throw new Error(`${what}: unexpected ${describe(ev)} after ${fmt(seen)}`);
    seen.push(ev);
  }
}

// Opens Bench/StreamSource on stream id with a window of 1,024 bytes and asks for more than that,
// then reads the 1,024 bytes: its handler is left blocked writing, the stream open on both sides.
async function sourceHeld(c, id) {
  c.send(streamOpen(id, 'Bench/StreamSource', 1024));
  await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === id, 'credit');
  c.send(streamSend(id, u64(1 << 20)));
  for (let got = 0; got < 1024;) {
    const d = await waitFor(c, (f) => f.kind === K.StreamData && f.id === id, `the source's first 1,024 bytes (${got} so far)`);
    got += d.payload.length;
  }
}

// Uploads data on stream id (opened already), within the credit the acceptor grants (waiting
// for its first StreamCredit unless initialCredit says it came already).
// Returns the frames the acceptor sent besides credit, up to and including its StreamReset.
async function upload(c, id, data, chunk = 32768, initialCredit) {
  let credit = initialCredit ?? 0; let off = 0; let first = initialCredit === undefined; const rest = [];
  let firstCredit = initialCredit;
  let ended = false;
  for (;;) {
    while (credit > 0 && off < data.length) {
      const n = Math.min(chunk, credit, data.length - off);
      c.send(streamSend(id, data.subarray(off, off + n))); off += n; credit -= n;
    }
    if (!first && off >= data.length && !ended) { c.send(streamEnd(id)); ended = true; }
    const ev = await c.frame(8000);
    if (ev.type !== 'frame') throw new Error(`stream ${id}: sent ${off} of ${data.length} B, then ${describe(ev)} after ${fmt(rest)}`);
    if (ev.kind === K.Ping) { c.send(frame({ kind: K.Pong, payload: ev.payload })); continue; }
    if (ev.kind === K.StreamCredit && ev.id === id) { credit += ev.payload.readUInt32BE(0); firstCredit ??= credit; first = false; continue; }
    if (ev.id === id && (ev.kind === K.StreamData || ev.kind === K.StreamEnd || ev.kind === K.StreamReset)) {
      rest.push(ev); if (ev.kind === K.StreamReset) return { rest, sent: off, firstCredit };
      continue;
    }
    throw new Error(`stream ${id}: unexpected ${describe(ev)}`);
  }
}

// Reads a stream's data as the downloader, granting back what it read, and checking the sender
// stays within the window. Returns {bytes, frames} up to the StreamReset.
async function download(c, id, window, { onFrame } = {}) {
  let credit = window; let got = 0; let unacked = 0; const frames = [];
  for (;;) {
    const ev = await c.frame(8000);
    if (ev.type !== 'frame') throw new Error(`stream ${id}: after ${got} B and ${fmt(frames.slice(-3))}, ${describe(ev)}`);
    if (ev.kind === K.Ping) { c.send(frame({ kind: K.Pong, payload: ev.payload })); continue; }
    if (ev.id !== id || ev.kind < K.StreamOpen) throw new Error(`stream ${id}: unexpected ${describe(ev)}`);
    if (onFrame) onFrame(ev);
    if (ev.kind === K.StreamData) {
      // "rpcd [...] sends StreamData of 32 KiB at most"
      expect(ev.payload.length <= 32768, `stream ${id}: a StreamData of ${ev.payload.length} B; page: rpcd sends StreamData of 32 KiB at most`);
      expect(ev.payload.length <= credit, `stream ${id}: the server sent ${ev.payload.length} B with only ${credit} B of credit; "never sends more than its credit"`);
      credit -= ev.payload.length; got += ev.payload.length; unacked += ev.payload.length;
      if (unacked >= window / 4) { c.send(streamCredit(id, unacked)); credit += unacked; unacked = 0; }
      frames.push({ kind: ev.kind, n: ev.payload.length, payload: ev.payload });
      continue;
    }
    frames.push(ev);
    if (ev.kind === K.StreamReset) return { bytes: got, frames };
  }
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

const ROUTES = [
  { name: 'Bench/EchoPacket' }, { name: 'Bench/EchoString' }, { name: 'Bench/MultiArgs' },
  { name: 'Bench/NoArg' }, { name: 'Bench/StreamSink', stream: true }, { name: 'Bench/StreamSource', stream: true },
  { name: 'Math/Sum' }, { name: 'Sys/Describe' }, { name: 'Sys/Health' }, { name: 'Sys/Ping' }, { name: 'Sys/Routes' },
  { name: 'Sys/Stats', blocking: true },
];

async function main() {
  // ---- 1. Built-in routes ("The routes of `rpcd serve`") ------------------------------------

  // "`Sys/Ping` | raw | ignored | `"pong"` (6 bytes, JSON text)"; "a raw route reads its payload
  // as bytes, and answers in the Request's codec"; "A Response carries the codec of its Request."
  await check('1 route Sys/Ping', async (open) => {
    const c = await open();
    for (const [codec, arg] of [[RAW, ''], [JSONC, 'anything'], [0x80, '\x00\x01']]) {
      const r = await c.call(codec + 1, 'Sys/Ping', arg, codec);
      expect(r.kind === K.Response && r.payload.toString() === '"pong"' && r.codec === codec,
        `codec ${codec}: got ${describe(r)} codec ${r.codec}; page: "pong" (6 bytes, JSON text), in the Request's codec`);
    }
  });

  // "`Sys/Routes` | JSON | none (empty payload, or `{}`) | an array of `{"name": "...",
  // "blocking": true, "stream": true}` (`blocking` and `stream` only when true), sorted by name"
  await check('1 route Sys/Routes', async (open) => {
    const c = await open();
    for (const [id, arg] of [[1, ''], [2, '{}']]) {
      const r = await c.call(id, 'Sys/Routes', arg);
      expect(r.kind === K.Response && r.codec === JSONC, `arg ${JSON.stringify(arg)}: got ${describe(r)}`);
      const list = JSON.parse(r.payload.toString());
      assert.deepStrictEqual(list, ROUTES, `arg ${JSON.stringify(arg)}: the route list differs from the page's table`);
    }
  });

  // "`Sys/Describe` | JSON | none, `{"route": ROUTE}` or the string `ROUTE` | an array of
  // descriptions, `{"name", "kind"}` ... `"argument"` and `"reply"`: JSON Schemas"; an unknown
  // route is NotFound.
  await check('1 route Sys/Describe', async (open) => {
    const c = await open();
    for (const [id, arg] of [[1, '"Math/Sum"'], [2, '{"route":"Math/Sum"}']]) {
      const r = await c.call(id, 'Sys/Describe', arg);
      expect(r.kind === K.Response && r.codec === JSONC, `arg ${arg}: got ${describe(r)}`);
      const list = JSON.parse(r.payload.toString());
      expect(list.length === 1 && list[0].name === 'Math/Sum' && list[0].kind === 'typed' &&
        list[0].argument.properties.a.type === 'integer' && list[0].reply.type === 'integer',
        `arg ${arg}: got ${r.payload}`);
    }
    const all = JSON.parse((await c.call(3, 'Sys/Describe', '')).payload.toString());
    assert.deepStrictEqual(all.map((d) => d.name), ROUTES.map((d) => d.name), 'Sys/Describe without a route: not every route');
    expect(all.find((d) => d.name === 'Sys/Ping').kind === 'raw' && all.find((d) => d.name === 'Bench/StreamSink').kind === 'stream',
      'Sys/Ping raw, Bench/StreamSink stream');
    const r = await c.call(4, 'Sys/Describe', '"No/Such"');
    expect(r.kind === K.Error && errCode(r) === C.NotFound, `an unknown route: got ${describe(r)}, want Error NotFound (5)`);
  });

  // "`Sys/Stats` | JSON, blocking | none | `{"goroutines", "heap_alloc", "heap_inuse", "sys",
  // "rss", "num_gc", "conns", "cpu_sec"}`, numbers"
  await check('1 route Sys/Stats', async (open) => {
    const c = await open();
    const r = await c.call(1, 'Sys/Stats', '');
    expect(r.kind === K.Response, `got ${describe(r)}`);
    const s = JSON.parse(r.payload.toString());
    const keys = ['goroutines', 'heap_alloc', 'heap_inuse', 'sys', 'rss', 'num_gc', 'conns', 'cpu_sec'];
    for (const k of keys) expect(typeof s[k] === 'number', `field ${k} is ${JSON.stringify(s[k])}, page: a number (${r.payload})`);
    const extra = Object.keys(s).filter((k) => !keys.includes(k));
    expect(extra.length === 0, `fields the page does not list: ${extra.join(', ')}`);
    expect(s.conns >= 1, `conns=${s.conns} while this connection is open`);
    log(`Sys/Stats: ${r.payload}`);
  });

  // "`Sys/Health` | raw | ignored | `"SERVING"` (9 bytes, JSON text), or `"NOT_SERVING"` from
  // the moment the server begins to drain"
  await check('1 route Sys/Health', async (open) => {
    const c = await open();
    const r = await c.call(1, 'Sys/Health', '', RAW);
    expect(r.kind === K.Response && r.payload.toString() === '"SERVING"' && r.codec === RAW,
      `got ${describe(r)} codec ${r.codec}; page: "SERVING" (9 bytes, JSON text) while serving`);
  });

  // "`Math/Sum` | JSON | `{"a": int64, "b": int64}`; a missing field is 0 | their sum, a JSON
  // number: `{"a":1,"b":2}` gives `3`"; "An empty payload means the zero value of their argument"
  await check('1 route Math/Sum', async (open) => {
    const c = await open();
    const cases = [['{"a":1,"b":2}', '3'], ['{"b":7}', '7'], ['{}', '0'], ['', '0'],
      ['{"a":-5,"b":2}', '-3'], ['{"a":9007199254740993,"b":0}', '9007199254740993'],
      ['{"a":4611686018427387904,"b":4611686018427387903}', '9223372036854775807']];
    let id = 1;
    for (const [arg, want] of cases) {
      const r = await c.call(id++, 'Math/Sum', arg);
      expect(r.kind === K.Response && r.codec === JSONC && r.payload.toString().trim() === want,
        `${JSON.stringify(arg)}: got ${describe(r)}; page: ${want}`);
    }
  });

  // "A typed route's argument that does not decode (a string for `a`, a truncated object) gets
  // Error `InvalidArgument` with the Unprocessed flag." "A Request in another codec [...] gets
  // Error `InvalidArgument` with the Unprocessed flag." (Codecs, Typed routes)
  await check('1 route Math/Sum, arguments that do not decode', async (open) => {
    const c = await open();
    const cases = [['{"a":"x","b":1}', JSONC], ['{"a":1', JSONC], ['[1,2]', JSONC], ['{"a":1.5}', JSONC],
      ['{"a":1,"b":2}', RAW], ['{"a":1,"b":2}', 0x80]];
    let id = 1;
    for (const [arg, codec] of cases) {
      const r = await c.call(id++, 'Math/Sum', arg, codec);
      expect(r.kind === K.Error && errCode(r) === C.InvalidArgument && r.flags === F_UNPROCESSED,
        `${JSON.stringify(arg)} codec ${codec}: got ${describe(r)}; page: Error InvalidArgument (3), Unprocessed`);
      log(`Math/Sum ${arg} codec ${codec}: "${errMsg(r)}"`);
    }
    // "Everything else is an error of one call and leaves the connection open"
    const r = await c.call(id++, 'Math/Sum', '{"a":1,"b":2}');
    expect(r.kind === K.Response && r.payload.toString() === '3', `after the errors: ${describe(r)}`);
  });

  // "`Bench/NoArg` | raw | ignored | `42` (2 bytes)"
  await check('1 route Bench/NoArg', async (open) => {
    const c = await open();
    for (const [id, codec, arg] of [[1, RAW, ''], [2, JSONC, '{"x":1}']]) {
      const r = await c.call(id, 'Bench/NoArg', arg, codec);
      expect(r.kind === K.Response && r.payload.toString() === '42' && r.codec === codec, `got ${describe(r)} codec ${r.codec}; page: 42 (2 bytes)`);
    }
  });

  // "`Bench/EchoString` | JSON | a JSON string | the same string"
  await check('1 route Bench/EchoString', async (open) => {
    const c = await open();
    let id = 1;
    for (const s of ['hello', '', 'h\u00e9llo \u2603 "q" \\ \n', 'x'.repeat(100000)]) {
      const r = await c.call(id++, 'Bench/EchoString', JSON.stringify(s));
      expect(r.kind === K.Response && r.codec === JSONC && JSON.parse(r.payload.toString()) === s,
        `${JSON.stringify(s).slice(0, 30)}: got ${describe(r)}; page: the same string`);
    }
    const r = await c.call(id++, 'Bench/EchoString', '42');
    expect(r.kind === K.Error && errCode(r) === C.InvalidArgument && r.flags === F_UNPROCESSED,
      `a number for a string: got ${describe(r)}; page: InvalidArgument, Unprocessed`);
  });

  // "`Bench/MultiArgs` | JSON | `{"i32": int32, "i64": int64, "b": bool, "f64": float64, "s":
  // string}` | a JSON number: i32 + i64 + f64 + the length of s in bytes, plus 1 if b"
  await check('1 route Bench/MultiArgs', async (open) => {
    const c = await open();
    const cases = [[{ i32: 1, i64: 2, b: true, f64: 0.5, s: 'abc' }, 7.5],
      [{ i32: -10, i64: 100, b: false, f64: 0.25, s: '\u00e9' }, 92.25], [{}, 0]];
    let id = 1;
    for (const [arg, want] of cases) {
      const r = await c.call(id++, 'Bench/MultiArgs', JSON.stringify(arg));
      expect(r.kind === K.Response && Number(JSON.parse(r.payload.toString())) === want,
        `${JSON.stringify(arg)}: got ${describe(r)}; page: ${want}`);
    }
  });

  // "`Bench/EchoPacket` | raw | any bytes | the same bytes, in the Request's codec"; "an echo of
  // bytes labelled JSON comes back labelled JSON"
  await check('1 route Bench/EchoPacket', async (open) => {
    const c = await open();
    let id = 1;
    for (const [codec, p] of [[RAW, Buffer.from([0, 1, 2, 255])], [JSONC, Buffer.from('not json {')], [0x80, Buffer.alloc(0)],
      [0xff, fill(9, 200000)]]) {
      const r = await c.call(id++, 'Bench/EchoPacket', p, codec);
      expect(r.kind === K.Response && r.codec === codec && r.payload.equals(p),
        `codec ${codec}, ${p.length} B: got ${describe(r)} codec ${r.codec}; page: the same bytes, in the Request's codec`);
    }
  });

  // "`Bench/StreamSink` | stream | the stream's bytes, to its StreamEnd | 8 bytes: how many it
  // read, unsigned, big-endian"; "the acceptor grants the opener's first credit with a
  // StreamCredit, and the opener sends no StreamData before it has one"; "When it returns, the
  // acceptor ends its direction (StreamEnd, if it had not) and sends StreamReset with code 0"
  await check('1 stream Bench/StreamSink', async (open) => {
    const c = await open();
    for (const [id, size] of [[1, 600000], [3, 0], [5, 1]]) {
      c.send(streamOpen(id, 'Bench/StreamSink', 262144));
      const { rest, firstCredit } = await upload(c, id, fill(id, size));
      // "An upload, with a window of 256 KiB each way (rpcd's default)"
      expect(firstCredit === 262144, `first StreamCredit ${firstCredit}; page: rpcd's default window is 256 KiB`);
      const shape = rest.map((f) => KIND_NAME[f.kind]).join(',');
      expect(shape === 'StreamData,StreamEnd,StreamReset', `${size} B: got ${fmt(rest)}; page: StreamData (8 bytes), StreamEnd, StreamReset code 0`);
      const [d, , r] = rest;
      expect(d.payload.length === 8 && d.payload.readBigUInt64BE(0) === BigInt(size), `${size} B: count ${d.payload.toString('hex')}`);
      expect(errCode(r) === 0 && r.flags === 0, `${size} B: ${describe(r)}; page: StreamReset code 0`);
    }
  });

  // "`Bench/StreamSource` | stream | 8 bytes first: a size, unsigned, big-endian | that many
  // bytes (a repeating pattern), then the end"; "StreamOpen [...] window: bytes the acceptor may
  // send before it is granted more"
  await check('1 stream Bench/StreamSource', async (open) => {
    const c = await open();
    for (const [id, size, window] of [[1, 1000000, 65536], [3, 0, 65536], [5, 70000, 262144]]) {
      c.send(streamOpen(id, 'Bench/StreamSource', window));
      const cr = await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === id, `stream ${id}: first StreamCredit`);
      expect(cr.payload.readUInt32BE(0) >= 8, `first credit ${cr.payload.readUInt32BE(0)}`);
      c.send(streamSend(id, u64(size)), streamEnd(id));
      const { bytes, frames } = await download(c, id, window);
      const tail = frames.filter((f) => f.kind !== K.StreamData).map((f) => KIND_NAME[f.kind]).join(',');
      expect(bytes === size, `size ${size}: got ${bytes} B; page: that many bytes`);
      expect(tail === 'StreamEnd,StreamReset', `size ${size}: then ${tail}; page: then the end (StreamEnd, StreamReset code 0)`);
      const r = frames[frames.length - 1];
      expect(errCode(r) === 0 && r.flags === 0, `size ${size}: ${describe(r)}`);
    }
  });

  // "fewer than 8 bytes before the StreamEnd: StreamReset `InvalidArgument`, Unprocessed"
  await check('1 stream Bench/StreamSource, fewer than 8 bytes', async (open) => {
    const c = await open();
    for (const [id, n] of [[1, 3], [3, 0]]) {
      c.send(streamOpen(id, 'Bench/StreamSource', 65536));
      await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === id, `stream ${id}: first StreamCredit`);
      c.send(...(n ? [streamSend(id, Buffer.alloc(n, 1))] : []), streamEnd(id));
      const f = await waitFor(c, (x) => x.kind === K.StreamReset && x.id === id, `stream ${id}: its StreamReset`,
        (x) => x.id === id && x.kind === K.StreamEnd);
      expect(errCode(f) === C.InvalidArgument && f.flags === F_UNPROCESSED, `${n} bytes: got ${describe(f)}; page: StreamReset InvalidArgument, Unprocessed`);
    }
  });

  // "Error id=8 flags=Unprocessed code=5" for "route=No/Such"; "a stream route that a Request
  // names, or a call route that a StreamOpen names | answered as an unknown route: Error
  // `NotFound` / StreamReset `NotFound`, Unprocessed"
  await check('1 unknown routes, and call/stream routes swapped', async (open) => {
    const c = await open();
    for (const [id, route] of [[1, 'No/Such'], [2, 'Bench/StreamSink'], [3, 'sys/ping'], [4, 'x'.repeat(256)]]) {
      const r = await c.call(id, route, '');
      expect(r.kind === K.Error && errCode(r) === C.NotFound && r.flags === F_UNPROCESSED,
        `Request ${route.slice(0, 20)}: got ${describe(r)}; page: Error NotFound, Unprocessed`);
    }
    for (const [id, route] of [[1, 'Math/Sum'], [3, 'No/Such']]) {
      c.send(streamOpen(id, route, 65536));
      const r = await c.frame();
      expect(r.kind === K.StreamReset && r.id === id && errCode(r) === C.NotFound && r.flags === F_UNPROCESSED,
        `StreamOpen ${route}: got ${describe(r)}; page: StreamReset NotFound, Unprocessed`);
    }
  });

  // ---- 2. Pipelining ("Many calls at once", "Backpressure") ----------------------------------

  // "A peer may pipeline any number of calls." "So a client must read its connection while it
  // writes" "a peer may send any number of Requests before the first reply; replies come back in
  // any order and are matched by call id."
  await check('2 pipelining 32 x 1 MiB Bench/EchoPacket on one connection', async (open) => {
    await pipelinedEcho(await open(), 32, 1 << 20);
  });
  await check('2 pipelining 128 x 256 KiB Bench/EchoPacket on one connection', async (open) => {
    await pipelinedEcho(await open(), 128, 256 << 10);
  });

  // ---- 3. Held back, not cut ------------------------------------------------------------------

  // "A peer that sends calls faster than it reads their replies is held back by TCP, not cut
  // off"; "one that writes everything before it reads anything will block in its write once the
  // buffers between the two are full, and the server with it"; "A peer that takes none of the
  // output for 30 s (`WriteTimeout`) is cut off" (we stall for far less).
  await check('3 held back, not cut: 1 MiB echoes written without reading', async (open) => {
    const c = await open();
    c.sock.pause();
    const size = 1 << 20; let written = 0; let stalled = false;
    while (written < 160 && !stalled) {
      written++;
      if (!c.send(req(written, 'Bench/EchoPacket', fill(written, size), RAW))) {
        stalled = await new Promise((res) => {
          const t = setTimeout(() => { c.sock.off('drain', onDrain); res(true); }, 1500);
          const onDrain = () => { clearTimeout(t); res(false); };
          c.sock.once('drain', onDrain);
        });
      }
      expect(!c.error && !c.closed, `the connection broke after ${written} calls while the client did not read: ${c.error?.code ?? 'closed'}`);
    }
    expect(stalled, `wrote ${written} MiB without the writes ever stalling; page: the client's write blocks once the buffers are full`);
    log(`the write stalled after ${written} calls of 1 MiB`);
    await sleep(500);
    expect(!c.error && !c.closed && c.sock.readyState === 'open', `the connection is not open after the stall: ${c.error?.code ?? c.sock.readyState}`);
    c.sock.resume();
    await pipelinedEchoAnswers(c, written, size);
  });

  // ---- 4. Half-close --------------------------------------------------------------------------

  // "A client may shut down its write side [...] after its last frame and go on reading. rpcd's
  // server then reads nothing more and: answers every call it has read [...] sends one **Ping**
  // right after the FIN, if anything is still owed [...] once everything is answered and
  // written, closes (its FIN)." "a half-closed connection [...] closes once it has answered
  // everything" (no GoAway).
  await check('4a half-close after 200 Sys/Stats calls', async (open) => {
    const c = await open();
    c.send(Buffer.concat(Array.from({ length: 200 }, (_, i) => req(i + 1, 'Sys/Stats', ''))));
    c.end();
    const { frames, end } = await c.untilEnd(20000);
    await halfCloseVerdict(frames, end, 200, (f) => { try { return f.kind === K.Response && typeof JSON.parse(f.payload.toString()).conns === 'number'; } catch { return false; } });
  });
  await check('4b half-close after 8 x 1 MiB Bench/EchoPacket calls', async (open) => {
    const c = await open();
    const size = 1 << 20;
    // Write while reading (the replies are 8 MiB: the server is held back otherwise).
    const reading = c.untilEnd(25000);
    await writeAll(c, Array.from({ length: 8 }, (_, i) => () => req(i + 1, 'Bench/EchoPacket', fill(i + 1, size), RAW)));
    c.end();
    const { frames, end } = await reading;
    await halfCloseVerdict(frames, end, 8, (f) => f.kind === K.Response && f.payload.equals(fill(f.id, size)));
  });
  // "lets open streams finish: a stream's data and its ending are still sent, within the credit
  // the client granted before its FIN"
  await check('4c half-close with a Bench/StreamSource stream open', async (open) => {
    const c = await open();
    const size = 200000;
    c.send(streamOpen(1, 'Bench/StreamSource', 262144));
    await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 1, 'first StreamCredit');
    c.send(streamSend(1, u64(size)), streamEnd(1), req(1, 'Sys/Stats', ''));
    c.end();
    const { frames, end } = await c.untilEnd(20000);
    const data = frames.filter((f) => f.kind === K.StreamData).reduce((n, f) => n + f.payload.length, 0);
    const others = frames.filter((f) => f.kind !== K.StreamData && f.kind !== K.Ping).map((f) => `${KIND_NAME[f.kind]}${f.kind === K.StreamReset ? ':' + errCode(f) : ''}`);
    expect(data === size, `got ${data} of ${size} stream bytes, then <${end}>; page: a stream's data and its ending are still sent`);
    const want = ['Response', 'StreamEnd', 'StreamReset:0'];
    expect(others.length === 3 && want.every((w) => others.includes(w)) && others.indexOf('StreamEnd') < others.indexOf('StreamReset:0'),
      `besides the data: ${others.join(',')}; expected a Response, StreamEnd and StreamReset code 0`);
    expect(end === 'fin', `the connection ended by <${end}>; page: the server closes (its FIN)`);
  });

  // "sends one **Ping** right after the FIN, if anything is still owed"; "once everything is
  // answered and written, closes (its FIN)". Nothing owed: no Ping, just the FIN.
  await check('4d half-close with nothing owed: the FIN and nothing else', async (open) => {
    let c = await open();
    c.end();
    let { frames, end } = await c.untilEnd(5000);
    expect(frames.length === 0 && end === 'fin', `a connection with no frames: got ${fmt(frames)} then <${end}>`);
    c = await open();
    const r = await c.call(1, 'Math/Sum', '{"a":1,"b":2}');
    expect(isResp(1, '3')(r), describe(r));
    c.end();
    ({ frames, end } = await c.untilEnd(5000));
    expect(frames.length === 0 && end === 'fin', `after a call already answered: got ${fmt(frames)} then <${end}>; page: a Ping only "if anything is still owed"`);
  });

  // ---- 5. GoAway that arrives -----------------------------------------------------------------

  // "A receiver checks the header as soon as its 24 bytes have arrived, before it buffers the
  // rest, and rejects the frame (protocol error)"; "The receiver sends a GoAway with code
  // `Internal` (13)"; "A peer that ends a connection with a GoAway [...] reads and discards what
  // the other peer still sends for up to 2 s or 4 MiB, until that peer closes"; "So a peer that
  // gets a GoAway reads it, then the end of the stream."
  await check('5 GoAway that arrives: 50 connections sending an oversized frame header + 1 MiB', async (open) => {
    const junk = Buffer.alloc(1 << 20, 0xa5);
    const one = async (i) => {
      const c = await open();
      const hdr = frame({ kind: K.Request, id: 1, route: 'Bench/EchoPacket', payloadLen: MAX_FRAME + 1 + i });
      c.send(hdr.subarray(0, HDR)); c.send(junk);
      const { frames, end } = await c.untilEnd(20000);
      const g = frames[0];
      if (!(frames.length === 1 && isGoAway(g) && g.payload.readUInt16BE(4) === C.Internal && g.payload.readUInt32BE(0) === 0 && end === 'fin')) {
        return `connection ${i}: got ${fmt(frames)} then <${end}>`;
      }
      if (i === 0) log(`oversized frame: "${g.payload.subarray(6)}"`);
      return null;
    };
    const bad = (await Promise.all(Array.from({ length: 50 }, (_, i) => one(i)))).filter(Boolean);
    expect(bad.length === 0, `${bad.length} of 50: ${bad.slice(0, 2).join(' | ')}; page: GoAway Internal (13), last call id 0, then the end of the stream`);
  });

  // The frame limit's edge: "whole frame size | 4 MiB (4,194,304 bytes), header included".
  await check('5 a frame of exactly 4 MiB is served; 4 MiB + 1, or the header alone of 5 MiB, is a protocol error', async (open) => {
    const c = await open();
    const room = MAX_FRAME - HDR - 'Bench/EchoPacket'.length;
    const p = fill(1, room);
    c.keep = true;
    const r = await c.call(1, 'Bench/EchoPacket', p, RAW);
    expect(r.kind === K.Response && r.payload.equals(p), `4 MiB frame: got ${describe(r)}`);
    c.send(req(2, 'Bench/EchoPacket', fill(2, room + 1), RAW));
    await expectGoAway(c, { code: C.Internal, last: 1, what: '4 MiB + 1 byte frame' });
    // "as soon as its 24 bytes have arrived, before it buffers the rest": the header alone.
    const d = await open();
    d.send(frame({ kind: K.Request, id: 1, route: 'Bench/EchoPacket', payloadLen: 5 << 20 }).subarray(0, HDR));
    await expectGoAway(d, { code: C.Internal, last: 0, what: 'the header alone of a 5 MiB frame' });
  });

  // ---- 6. Frames out of order -----------------------------------------------------------------

  // "A second Hello, or a Hello after any other frame, is a protocol error, as is a Welcome sent
  // by a client"; "The receiver sends a GoAway with code `Internal` (13) and a message naming the
  // rule, parses nothing more, and closes the connection as 'Closing' says."
  await check('6a a Welcome sent by the client', async (open) => {
    const c = await open();
    c.send(frame({ kind: K.Welcome, payload: 'mallory' }), req(1, 'Sys/Ping'));
    await expectGoAway(c, { what: 'Welcome from the client' });
  });
  await check('6b a second Hello', async (open) => {
    const c = await open();
    // "A client may send a Hello to a server that requires none: the server answers Welcome with
    // an empty identity."
    c.send(frame({ kind: K.Hello }), frame({ kind: K.Hello }), req(1, 'Sys/Ping'));
    await expectGoAway(c, { what: 'second Hello',
      before: [(f) => f.kind === K.Welcome && f.payload.length === 0 && metaGet(f, 'rpcd-compression') === undefined] });
  });
  // "A Hello, if the client sends one, is its first frame (Pings may come before it)."
  // "writes whatever it owed before the GoAway, then the GoAway"; "`last call id` is the greatest
  // call id of the client's the server took in".
  await check('6c a Hello after a call', async (open) => {
    const c = await open();
    c.send(req(1, 'Math/Sum', '{"a":1,"b":2}'), frame({ kind: K.Hello }), req(2, 'Sys/Ping'));
    await expectGoAway(c, { last: 1, what: 'Hello after a Request', before: [isResp(1, '3')] });
  });
  // "After its own GoAway a peer starts nothing: a Request [...] from a peer that has sent GoAway
  // is a protocol error. It may still send Cancel, Ping and Pong"
  await check('6d a Request after the client\'s own GoAway', async (open) => {
    const c = await open();
    c.send(req(1, 'Math/Sum', '{"a":2,"b":2}'), frame({ kind: K.GoAway, payload: goAwayBody(0, C.Unavailable, 'client leaving') }), req(2, 'Sys/Ping'));
    await expectGoAway(c, { last: 1, what: 'Request after the client\'s GoAway', before: [isResp(1, '4')] });
  });
  await check('6d a OneWay and a StreamOpen after the client\'s own GoAway', async (open) => {
    for (const f of [frame({ kind: K.OneWay, id: 1, route: 'Sys/Ping' }), streamOpen(1, 'Bench/StreamSink', 1024)]) {
      const c = await open();
      c.send(frame({ kind: K.GoAway, payload: goAwayBody(0, C.Unavailable) }), f);
      await expectGoAway(c, { what: `${KIND_NAME[f[3]]} after the client's GoAway` });
    }
  });
  // "| a StreamReset with code 0 from the stream's opener (an odd id from the client, an even one
  // from the server) | protocol error, known stream or not: code 0 is the acceptor's, for success |"
  await check('6e a StreamReset with code 0 from the opener, unknown and known stream', async (open) => {
    let c = await open();
    c.send(streamReset(7, 0));
    await expectGoAway(c, { what: 'StreamReset code 0 for an unknown odd id' });
    c = await open();
    c.send(streamOpen(1, 'Bench/StreamSink', 65536));
    await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 1, 'first StreamCredit');
    c.send(streamReset(1, 0));
    await expectGoAway(c, { what: 'StreamReset code 0 for an open stream' });
  });
  // The lawful neighbours: "Until its Welcome, the connection may send only Hello and Ping";
  // "A Hello [...] is its first frame (Pings may come before it)"; "The client may send Requests
  // right after its Hello without waiting for the Welcome; the server takes them in order".
  await check('6 lawful: Ping, then Hello, then a call', async (open) => {
    const c = await open();
    c.send(ping('p1'), frame({ kind: K.Hello, payload: 'creds-ignored' }), req(1, 'Math/Sum', '{"a":20,"b":22}'));
    const fs = [await c.frame(), await c.frame(), await c.frame()];
    expect(fs[0].kind === K.Pong && fs[0].payload.toString() === 'p1' && fs[1].kind === K.Welcome && fs[1].payload.length === 0 && isResp(1, '42')(fs[2]),
      `got ${fmt(fs)}; page: Pong, Welcome (empty identity), Response 42`);
  });
  // "rpcd's servers know `token` [...] and `hmac`"; "a server that requires no authentication
  // welcomes any Hello"; "the server answers Welcome with an empty identity".
  await check('6 lawful: a Hello with credentials to a server that requires none', async (open) => {
    const c = await open();
    c.send(frame({ kind: K.Hello, meta: [['rpcd-auth-method', 'token']], payload: 's3cr3t-token' }), req(1, 'Sys/Ping', '', RAW));
    const fs = [await c.frame(), await c.frame()];
    expect(fs[0].kind === K.Welcome && fs[0].payload.length === 0 && isResp(1, '"pong"')(fs[1]), `got ${fmt(fs)}; page: Welcome (empty identity), then the call`);
  });
  // "The calls a GoAway that ends a connection names as taken in, but that were not answered
  // before it, were cancelled: their fate is unknown to the caller." "`last call id` is the
  // greatest call id of the client's the server took in". Calls on the blocking pool when a
  // protocol error comes: named as taken in; none may be answered after the GoAway.
  await check('6 protocol error behind blocking calls: GoAway names them all', async (open) => {
    const c = await open();
    c.send(Buffer.concat([...Array.from({ length: 20 }, (_, i) => req(i + 1, 'Sys/Stats')), frame({ kind: K.Welcome })]));
    const { frames, end } = await c.untilEnd(8000);
    const gi = frames.findIndex((f) => f.kind === K.GoAway);
    expect(gi >= 0 && gi === frames.length - 1 && end === 'fin', `got ${fmt(frames)} then <${end}>`);
    const g = frames[gi];
    expect(g.payload.readUInt16BE(4) === C.Internal && g.payload.readUInt32BE(0) === 20, `${describe(g)}; expected code 13, last call id 20`);
    log(`20 Sys/Stats then a Welcome: ${gi} answered before the GoAway`);
  });
  await check('6 lawful: after the client\'s GoAway, Ping, Cancel and a stream already open still go', async (open) => {
    const c = await open();
    c.send(streamOpen(1, 'Bench/StreamSink', 65536));
    await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 1, 'first StreamCredit');
    c.send(frame({ kind: K.GoAway, payload: goAwayBody(0, C.Unavailable, 'done') }), ping('after'), frame({ kind: K.Cancel, id: 5 }));
    const f = await c.frame();
    expect(f.kind === K.Pong && f.payload.toString() === 'after', `got ${describe(f)}; page: a Ping is still answered`);
    c.send(streamSend(1, Buffer.from('abc')), streamEnd(1));
    const rest = [];
    while (!rest.length || rest[rest.length - 1].kind !== K.StreamReset) {
      const x = await c.frame();
      if (x.type !== 'frame') throw new Error(`the stream opened before the GoAway: ${fmt(rest)} then ${describe(x)}`);
      if (x.kind !== K.StreamCredit) rest.push(x);
    }
    const shape = rest.map((x) => KIND_NAME[x.kind]).join(',');
    expect(shape === 'StreamData,StreamEnd,StreamReset', `the stream opened before the GoAway: ${fmt(rest)}`);
    expect(!c.ended, 'the server closed the connection after the client\'s GoAway; page: "the client closes the connection when it is done"');
  });

  // Serial-number order of "last call id": "the greatest call id (in serial-number order), of
  // calls the receiver sent, that it has taken in"; "a client's calls can arrive out of the
  // order of their ids".
  await check('6 GoAway last call id in serial-number order', async (open) => {
    let c = await open();
    c.send(req(10, 'Sys/Ping'), req(3, 'Sys/Ping'), frame({ kind: K.Welcome }));
    await expectGoAway(c, { last: 10, what: 'ids 10, 3', before: [isResp(10), isResp(3)] });
    c = await open();
    c.send(req(2, 'Sys/Ping'), req(0xfffffffe, 'Sys/Ping'), frame({ kind: K.Welcome }));
    await expectGoAway(c, { last: 2, what: 'ids 2, 0xFFFFFFFE (2 comes after)', before: [isResp(2), isResp(0xfffffffe)] });
  });

  // ---- 7. Deadlines and Cancel ----------------------------------------------------------------

  // "The field counts whole milliseconds, and `0` means none, so a caller rounds what is left
  // up: 0.3 ms left travels as `1`." "| a call whose deadline passes while its handler runs |
  // cancels the handler's context; the handler's answer, usually `DeadlineExceeded`, is still
  // sent |"
  await check('7 deadline of 1 ms on fast calls is answered', async (open) => {
    const c = await open();
    let id = 1;
    for (const route of ['Math/Sum', 'Sys/Ping', 'Sys/Stats', 'Bench/EchoPacket']) {
      const r = await c.call(id++, route, route === 'Math/Sum' ? '{"a":1,"b":2}' : '', JSONC, { deadline: 1 });
      expect(r.kind === K.Response || (r.kind === K.Error && errCode(r) === C.DeadlineExceeded),
        `${route} deadline=1: got ${describe(r)}; page: answered (by the handler, or DeadlineExceeded)`);
      if (r.kind !== K.Response) log(`${route} deadline=1 answered ${describe(r)}`);
    }
    const r = await c.call(id++, 'Math/Sum', '{"a":1,"b":2}', JSONC, { deadline: 0xffffffff });
    expect(isResp(id - 1, '3')(r), `deadline 0xFFFFFFFF: ${describe(r)}`);
  });

  // "A Cancel that names an id the receiver is not serving a Request under (already answered,
  // never seen, or a OneWay's) is ignored." "| a Cancel for a call it already answered, or never
  // saw | ignores it |"
  await check('7 Cancel for an id not in flight is ignored', async (open) => {
    const c = await open();
    const r1 = await c.call(1, 'Sys/Ping', '');
    expect(r1.kind === K.Response, describe(r1));
    c.send(frame({ kind: K.Cancel, id: 1 }), frame({ kind: K.Cancel, id: 12345 }),
      frame({ kind: K.OneWay, id: 77, route: 'Sys/Stats' }), frame({ kind: K.Cancel, id: 77 }));
    const before = await c.sync();
    expect(before.length === 0, `frames for Cancels of ids not in flight: ${fmt(before)}`);
    const r = await c.call(2, 'Math/Sum', '{"a":1,"b":2}');
    expect(isResp(2, '3')(r), `after the Cancels: ${describe(r)}`);
  });

  // "A cancelled call is still answered when its handler returns: with the handler's error,
  // which for a handler that returns its context's error is `Canceled` (1) [...]; a call
  // cancelled before its handler started (queued on rpcd's blocking pool) is answered `Canceled`
  // without running." (The diagram above it says the callee "may skip the reply": we accept a
  // Response or Error Canceled for each call, and require an answer.)
  await check('7 Cancel right behind blocking calls', async (open) => {
    const c = await open();
    const n = 50;
    const frames = [];
    for (let i = 1; i <= n; i++) frames.push(req(i, 'Sys/Stats', ''), frame({ kind: K.Cancel, id: i }));
    c.send(Buffer.concat(frames));
    const before = await c.sync(10000);
    // The blocking pool may still be finishing: wait for the rest.
    const answers = new Map();
    for (const f of before) answers.set(f.id, f);
    while (answers.size < n) {
      const f = await c.frame(5000);
      if (f.type !== 'frame') break;
      answers.set(f.id, f);
    }
    const bad = [...answers.values()].filter((f) => !(f.kind === K.Response || (f.kind === K.Error && errCode(f) === C.Canceled)));
    expect(bad.length === 0, `answers: ${fmt(bad.slice(0, 3))}; page: the handler's answer or Canceled`);
    const counts = [...answers.values()].reduce((m, f) => { const k = describe(f).split(' ')[0] + (f.kind === K.Error ? errCode(f) : ''); m[k] = (m[k] || 0) + 1; return m; }, {});
    log(`50 Sys/Stats each followed by its Cancel: ${JSON.stringify(counts)}, ${n - answers.size} unanswered`);
    expect(answers.size === n, `${n - answers.size} of ${n} cancelled calls got no answer (${JSON.stringify(counts)}); page: "A cancelled call is still answered when its handler returns"`);
  });

  // StreamOpen's "deadline, in milliseconds counted from when the acceptor reads the frame,
  // bounds the whole stream". A Bench/StreamSink that never gets its StreamEnd runs into it;
  // "When it returns, the acceptor [...] sends [...] StreamReset [...] with its error's code".
  await check('7 a stream\'s deadline ends it', async (open) => {
    const c = await open();
    const t0 = Date.now();
    c.send(streamOpen(1, 'Bench/StreamSink', 65536, { deadline: 300 }));
    await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 1, 'first StreamCredit');
    c.send(streamSend(1, Buffer.alloc(10)));
    const r = await waitFor(c, (f) => f.kind === K.StreamReset && f.id === 1, 'the StreamReset at the deadline',
      (f) => f.id === 1 && (f.kind === K.StreamEnd || f.kind === K.StreamCredit), 10000);
    const ms = Date.now() - t0;
    log(`stream deadline 300 ms: ${describe(r)} after ${ms} ms`);
    expect(errCode(r) === C.DeadlineExceeded, `got ${describe(r)} after ${ms} ms; expected StreamReset DeadlineExceeded (4)`);
    expect(ms >= 250, `reset after ${ms} ms, before the 300 ms deadline`);
  });

  // The opener abandons a stream "by sending StreamReset with `Canceled` (1) [...]; the acceptor
  // cancels the handler's context and sends nothing more on it."
  await check('7 the opener\'s StreamReset Canceled: nothing more on the stream', async (open) => {
    const c = await open();
    c.send(streamOpen(1, 'Bench/StreamSource', 65536));
    await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 1, 'first StreamCredit');
    c.send(streamSend(1, u64(1e9)));
    await waitFor(c, (f) => f.kind === K.StreamData && f.id === 1, 'first StreamData');
    c.send(streamReset(1, C.Canceled, 'gave up'));
    // Whatever was in flight before the reset arrived may still come; after a Pong sent after the
    // reset was read, nothing may.
    await c.sync();
    const after = await c.sync();
    expect(after.length === 0, `after the reset: ${fmt(after)}`);
    // "Frames [...] for a stream it does not know (finished, reset, never opened) | drops it"
    c.send(streamSend(1, Buffer.alloc(5)), streamCredit(1, 100), streamEnd(1), streamReset(1, C.Canceled));
    const after2 = await c.sync();
    expect(after2.length === 0, `frames for the finished stream: ${fmt(after2)}`);
  });

  // ---- 8. More of "The connection's life" and "Edge cases a receiver meets" --------------------

  // "Keep-alive: either peer may send Ping with up to 64 bytes of payload; the other answers Pong
  // with the same payload." Ping: "0 to 64 bytes" (Rules per kind).
  await check('8 Ping of 0 and 64 bytes answered, 65 bytes a protocol error', async (open) => {
    const c = await open();
    for (const p of ['', 'x'.repeat(64)]) {
      c.send(ping(p)); const f = await c.frame();
      expect(f.kind === K.Pong && f.payload.toString() === p && f.id === 0, `Ping of ${p.length}: ${describe(f)}`);
    }
    c.send(ping('y'.repeat(65)));
    await expectGoAway(c, { what: 'Ping of 65 bytes' });
  });

  // "| a Response, Error or Pong that answers nothing it sent (late, after a Cancel, or stray) |
  // drops it; the connection stays open |" "| an Error with call id 0 | [...] a server: drops it |"
  await check('8 stray Response, Error, Pong, Error id 0, stream frames and Unsubscribe are dropped', async (open) => {
    const c = await open();
    // Also: "| a StreamData, StreamCredit or StreamEnd for a stream it does not know (finished,
    // reset, never opened) | drops it |", "| a StreamReset for a stream it does not know | ignores
    // it |", and of an Unsubscribe from the client, "An unknown id is ignored."
    c.send(frame({ kind: K.Response, id: 99, payload: 'late', codec: JSONC }), frame({ kind: K.Error, id: 98, payload: errBody(5, 'x') }),
      frame({ kind: K.Pong, payload: 'stray' }), frame({ kind: K.Error, id: 0, flags: F_UNPROCESSED, payload: errBody(7, 'no') }),
      streamSend(99, Buffer.from('x')), streamCredit(99, 10), streamEnd(99), streamReset(99, C.Canceled),
      streamSend(2, Buffer.from('x')), streamCredit(4, 10), streamEnd(6), streamReset(8, C.Canceled), streamReset(10, 0),
      frame({ kind: K.Unsubscribe, id: 77 }));
    const before = await c.sync();
    expect(before.length === 0, `got ${fmt(before)}`);
    const r = await c.call(1, 'Math/Sum', '{"a":1,"b":2}');
    expect(isResp(1, '3')(r), describe(r));
  });

  // "Order: a receiver takes a connection's frames in the order they arrive; the calls it runs at
  // once are answered in that order". Every route here but Sys/Stats runs at once.
  await check('8 inline calls are answered in the order they arrive', async (open) => {
    const c = await open();
    const routes = [['Math/Sum', '{"a":1,"b":2}', '3'], ['Sys/Ping', '', '"pong"'], ['Bench/NoArg', '', '42'],
      ['Bench/EchoString', '"s"', '"s"'], ['Bench/EchoPacket', 'xyz', 'xyz'], ['No/Such', '', null], ['Math/Sum', '{"a":"bad"}', null]];
    const n = 700; const ids = [];
    const frames = [];
    for (let i = 0; i < n; i++) {
      const id = ((i * 7919) % 100000) + 1; ids.push(id);
      const [route, arg] = routes[i % routes.length];
      frames.push(req(id, route, arg, JSONC));
    }
    c.send(Buffer.concat(frames));
    for (let i = 0; i < n; i++) {
      const f = await c.frame();
      const want = routes[i % routes.length][2];
      expect(f.type === 'frame' && f.id === ids[i] && (want === null ? f.kind === K.Error : isResp(ids[i], want)(f)),
        `answer ${i}: ${describe(f)}; expected the answer to call ${ids[i]} (${routes[i % routes.length][0]})`);
    }
  });

  // A frame that arrives a byte at a time is the same frame ("A receiver checks the header as
  // soon as its 24 bytes have arrived").
  await check('8 a call written a byte at a time', async (open) => {
    const c = await open();
    const f = req(1, 'Math/Sum', '{"a":40,"b":2}', JSONC, { meta: [['k', 'v']] });
    for (let i = 0; i < f.length; i++) { c.send(f.subarray(i, i + 1)); await sleep(3); }
    const r = await c.frame();
    expect(isResp(1, '42')(r), describe(r));
  });

  // "A one-way call (notify): no Response and no Error are ever sent, even when the route is
  // unknown."
  await check('8 OneWays are never answered', async (open) => {
    const c = await open();
    c.send(frame({ kind: K.OneWay, id: 1, route: 'No/Such' }), frame({ kind: K.OneWay, id: 2, route: 'Math/Sum', codec: JSONC, payload: '{"a":' }),
      frame({ kind: K.OneWay, id: 3, route: 'Sys/Stats', codec: JSONC }), frame({ kind: K.OneWay, id: 4, route: 'Bench/EchoPacket', payload: 'x' }));
    await sleep(300);
    const before = await c.sync();
    expect(before.length === 0, `got ${fmt(before)}`);
  });

  // "| a Request whose call id is still in flight on this connection | may run it (rpcd does,
  // for calls it answers at once) or answer Error `InvalidArgument` with Unprocessed (rpcd does,
  // for calls on its blocking pool) |"
  await check('8 a Request whose call id is still in flight', async (open) => {
    const c = await open();
    c.send(req(5, 'Sys/Ping'), req(5, 'Sys/Ping'));
    const a = [await c.frame(), await c.frame()];
    expect(a.every(isResp(5, '"pong"')), `two inline calls with id 5: ${fmt(a)}; page: rpcd runs both`);
    c.send(req(6, 'Sys/Stats'), req(6, 'Sys/Stats'));
    const bb = [await c.frame(), await c.frame()];
    const resp = bb.filter((f) => f.kind === K.Response).length;
    const inval = bb.filter((f) => f.kind === K.Error && errCode(f) === C.InvalidArgument && f.flags === F_UNPROCESSED).length;
    expect(bb.every((f) => f.id === 6) && resp >= 1 && resp + inval === 2, `two blocking calls with id 6: ${fmt(bb)}`);
    log(`two Sys/Stats with id 6: ${fmt(bb)}`);
  });

  // "calls on the blocking pool at once | 256 per connection [...] | Error `ResourceExhausted`,
  // Unprocessed: "too many calls in flight on this connection"". Sys/Stats is fast, so whether
  // the limit is reached depends on timing: every call must get one of the two answers.
  await check('8 600 blocking calls at once: each answered, or refused ResourceExhausted', async (open) => {
    const c = await open();
    const n = 600;
    c.send(Buffer.concat(Array.from({ length: n }, (_, i) => req(i + 1, 'Sys/Stats'))));
    const seen = new Map(); let refused = 0;
    while (seen.size < n) {
      const f = await c.frame(10000);
      expect(f.type === 'frame', `after ${seen.size} answers: ${describe(f)}`);
      expect(!seen.has(f.id), `call ${f.id} answered twice`);
      seen.set(f.id, true);
      if (f.kind === K.Error) {
        expect(errCode(f) === C.ResourceExhausted && f.flags === F_UNPROCESSED, `call ${f.id}: ${describe(f)}`);
        refused++;
      } else expect(f.kind === K.Response, describe(f));
    }
    log(`600 Sys/Stats at once: ${refused} refused ResourceExhausted`);
  });

  // "| streams open | 128 opened by the client | StreamReset `ResourceExhausted`, Unprocessed |"
  // "A stream is finished for a peer once it has sent or received its StreamReset."
  await check('8 129th open stream refused ResourceExhausted; a slot frees on reset', async (open) => {
    const c = await open();
    const opens = [];
    for (let i = 0; i < 129; i++) opens.push(streamOpen(2 * i + 1, 'Bench/StreamSink', 0));
    c.send(Buffer.concat(opens));
    const credits = new Set(); let refusal = null;
    while (credits.size + (refusal ? 1 : 0) < 129) {
      const f = await c.frame();
      expect(f.type === 'frame', `after ${credits.size} credits: ${describe(f)}`);
      if (f.kind === K.StreamCredit) credits.add(f.id);
      else if (f.kind === K.StreamReset) { expect(!refusal, `second refusal ${describe(f)}`); refusal = f; } else throw new Error(`unexpected ${describe(f)}`);
    }
    expect(refusal && refusal.id === 257 && errCode(refusal) === C.ResourceExhausted && refusal.flags === F_UNPROCESSED,
      `the 129th: ${describe(refusal)}; page: StreamReset ResourceExhausted, Unprocessed`);
    c.send(streamReset(1, C.Canceled));
    await c.sync();
    c.send(streamOpen(259, 'Bench/StreamSink', 0));
    const f = await c.frame();
    expect(f.kind === K.StreamCredit && f.id === 259, `a new stream after one was reset: ${describe(f)}`);
  });

  // Compression: "A client that wants compression sends a Hello naming what it takes"; "The
  // server answers a Hello that names compressions with its own list in the Welcome"; "From the
  // Welcome on, the server may compress the payload of any Response [...] in the first
  // compression of the client's list that it does. rpcd compresses replies of 1 KiB or more"
  await check('8 compression: gzip negotiated, compressed call and reply', async (open) => {
    const c = await open();
    c.send(frame({ kind: K.Hello, meta: [['rpcd-compression', 'br, gzip']] }));
    const w = await c.frame();
    expect(w.kind === K.Welcome, `got ${describe(w)}`);
    const list = (metaGet(w, 'rpcd-compression') || '').split(',').map((s) => s.trim());
    expect(list.includes('gzip'), `Welcome's rpcd-compression: ${metaGet(w, 'rpcd-compression')}`);
    c.tookCompression.add(F_GZIP);
    const p = Buffer.from('{"k":"' + 'abc'.repeat(20000) + '"}');
    const r = await c.call(1, 'Bench/EchoPacket', zlib.gzipSync(p), JSONC, { flags: F_GZIP });
    expect(r.kind === K.Response && r.codec === JSONC, describe(r));
    const got = (r.flags & 0x06) === F_GZIP ? zlib.gunzipSync(r.payload) : r.payload;
    expect(got.equals(p), 'the echo differs once expanded');
    expect((r.flags & 0x06) === F_GZIP, `reply of ${p.length} B came with flags ${r.flags}; page: rpcd compresses replies of 1 KiB or more (in gzip, the only one the client named)`);
    const s = await c.call(2, 'Sys/Ping', '', RAW);
    expect(s.flags === 0 && s.payload.toString() === '"pong"', `small reply: ${describe(s)}`);
    // "a gzip member, or several one after the other"
    const two = Buffer.concat([zlib.gzipSync(Buffer.from('"ab')), zlib.gzipSync(Buffer.from('cd"'))]);
    const e = await c.call(3, 'Bench/EchoString', two, JSONC, { flags: F_GZIP });
    expect(isResp(3, '"abcd"')(e), `two gzip members: ${describe(e)}`);
  });
  // "in the first compression of the client's list that it does"; "names it does not know are
  // skipped"; "spaces around a comma are ignored"; "(lower case, compared exactly)"; "rpcd
  // compresses replies of 1 KiB or more (`CompressMin`), and only when that makes them smaller";
  // "The server answers a Hello that names compressions with its own list in the Welcome".
  await check('8 compression: the client\'s preference, the 1 KiB threshold, only when smaller', async (open) => {
    const big = Buffer.alloc(5000, 'abc');
    const cases = [['zstd,gzip', F_ZSTD, big], ['gzip,zstd', F_GZIP, big], ['br, gzip', F_GZIP, big], [' gzip , zstd ', F_GZIP, big],
      ['br', 0, big], ['GZIP', 0, big], ['gzip', 0, Buffer.alloc(1023, 'a')], ['gzip', F_GZIP, Buffer.alloc(1024, 'a')],
      ['gzip', 0, noise(4000)]];
    const bad = [];
    for (const [list, want, p] of cases) {
      const c = await open();
      c.tookCompression = new Set([F_GZIP, F_ZSTD]);
      c.send(frame({ kind: K.Hello, meta: [['rpcd-compression', list]] }), req(1, 'Bench/EchoPacket', p, RAW));
      const w = await c.frame(); const r = await c.frame();
      const wl = metaGet(w, 'rpcd-compression');
      if (!(w.kind === K.Welcome && wl && wl.split(',').map((x) => x.trim()).includes('gzip'))) bad.push(`Hello "${list}": ${describe(w)} rpcd-compression=${wl}`);
      const comp = r.flags & 0x06;
      if (r.kind !== K.Response || comp !== want) bad.push(`Hello "${list}", ${p.length} B reply: flags ${r.flags}, expected ${want}`);
      else if (comp === F_GZIP && !zlib.gunzipSync(r.payload).equals(p)) bad.push(`Hello "${list}": the gzip reply does not expand to the echo`);
      else if (comp === F_ZSTD && r.payload.readUInt32LE(0) !== 0xfd2fb528) bad.push(`Hello "${list}": the zstd reply does not start with a zstd frame's magic`);
      else if (comp === 0 && !r.payload.equals(p)) bad.push(`Hello "${list}": the echo differs`);
      c.destroy();
    }
    expect(bad.length === 0, bad.join(' | '));
  });

  // "| a compressed payload in a compression the receiver did not name but does | rpcd expands it |"
  // and, with no Hello, the server may not compress its replies ("A peer sends a compressed
  // payload only in a compression the other has said it takes").
  await check('8 compression: gzip and zstd calls without a Hello are expanded, replies uncompressed', async (open) => {
    const c = await open();
    const p = fill(1, 50000);
    const r = await c.call(1, 'Bench/EchoPacket', zlib.gzipSync(p), RAW, { flags: F_GZIP });
    expect(r.kind === K.Response && r.flags === 0 && r.payload.equals(p), `got ${describe(r)} flags ${r.flags}`);
    for (const [id, q] of [[2, Buffer.from('hello zstd')], [3, fill(3, 70000)]]) {
      const z = await c.call(id, 'Bench/EchoPacket', zstdRaw(q), RAW, { flags: F_ZSTD });
      expect(z.kind === K.Response && z.flags === 0 && z.payload.equals(q), `zstd (one Raw block, ${q.length} B): got ${describe(z)}`);
    }
  });
  // "A call whose payload does not expand (not valid data for its compression, or empty) gets
  // Error `InvalidArgument` with the Unprocessed flag, and one that expands past that room Error
  // `ResourceExhausted` with the Unprocessed flag; the connection stays open. (A call to no route
  // is refused as such, `NotFound`, before its payload is looked at.)"
  await check('8 compression: bad, empty and oversized compressed calls', async (open) => {
    const c = await open();
    const cases = [
      [1, 'Bench/EchoPacket', Buffer.from('not gzip at all'), C.InvalidArgument],
      [2, 'Bench/EchoPacket', Buffer.alloc(0), C.InvalidArgument],
      [3, 'Bench/EchoPacket', zlib.gzipSync(Buffer.alloc(MAX_FRAME)), C.ResourceExhausted],
      [4, 'Bench/EchoPacket', zlib.gzipSync(Buffer.alloc(MAX_FRAME - HDR - 16 + 1)), C.ResourceExhausted],
      [5, 'No/Such', Buffer.from('not gzip at all'), C.NotFound],
      [6, 'Math/Sum', zlib.gzipSync(Buffer.from('{"a":1,"b":2}')).subarray(0, 15), C.InvalidArgument],
    ];
    for (const [id, route, p, code] of cases) {
      const r = await c.call(id, route, p, RAW, { flags: F_GZIP });
      expect(r.kind === K.Error && errCode(r) === code && r.flags === F_UNPROCESSED,
        `call ${id} (${route}, ${p.length} B gzip): got ${describe(r)}; page: Error ${CODE_NAME[code]}, Unprocessed`);
    }
    const room = zlib.gzipSync(Buffer.alloc(MAX_FRAME - HDR - 16, 7));
    const r = await c.call(7, 'Bench/EchoPacket', room, RAW, { flags: F_GZIP });
    expect(r.kind === K.Response && r.payload.length === MAX_FRAME - HDR - 16, `a call that expands to exactly the room: ${describe(r)}`);
  });
  // "Value `3` is reserved, and a compression on any other kind is a protocol error."
  await check('8 compression 3, and a compression on a Ping, are protocol errors', async (open) => {
    let c = await open();
    c.send(req(1, 'Bench/EchoPacket', 'x', RAW, { flags: 0x06 }));
    await expectGoAway(c, { what: 'compression 3' });
    c = await open();
    c.send(frame({ kind: K.Ping, flags: F_GZIP, payload: zlib.gzipSync(Buffer.from('x')) }));
    await expectGoAway(c, { what: 'gzip Ping' });
  });
  // Streams: "An acceptor that takes some answers a StreamOpen that carries the key [...] with
  // its own list in the metadata of its first StreamCredit"; "Flow control counts the stream's
  // bytes as expanded."; "A compressed StreamData that does not expand [...] finishes that
  // stream: the receiver sends StreamReset `InvalidArgument` (3), without the Unprocessed flag
  // [...]; the connection and its other streams go on."
  await check('8 compression on streams', async (open) => {
    const c = await open();
    c.send(streamOpen(1, 'Bench/StreamSink', 65536, { meta: [['rpcd-compression', 'gzip']] }));
    const cr = await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 1, 'first StreamCredit');
    expect((metaGet(cr, 'rpcd-compression') || '').split(',').map((s) => s.trim()).includes('gzip'),
      `first StreamCredit's rpcd-compression: ${metaGet(cr, 'rpcd-compression')}`);
    const credit = cr.payload.readUInt32BE(0);
    const data = Buffer.alloc(Math.min(credit, 32768), 'log line; ');
    c.send(streamSend(1, zlib.gzipSync(data), F_GZIP), streamEnd(1));
    const d = await waitFor(c, (f) => f.kind === K.StreamData && f.id === 1, 'the count', (f) => f.kind === K.StreamCredit);
    expect(d.payload.readBigUInt64BE(0) === BigInt(data.length), `count ${d.payload.readBigUInt64BE(0)}; page: counts ${data.length} (as expanded)`);
    await waitFor(c, (f) => f.kind === K.StreamReset && f.id === 1, 'StreamReset code 0', (f) => f.kind === K.StreamEnd || f.kind === K.StreamCredit);
    // No key: a first StreamCredit without it; a bad gzip StreamData resets the stream only.
    c.send(streamOpen(3, 'Bench/StreamSink', 65536), streamOpen(5, 'Bench/StreamSink', 65536));
    let cr5 = null;
    const cr3 = await waitFor(c, (f) => f.kind === K.StreamCredit && f.id === 3, 'first StreamCredit of 3', (f) => f.kind === K.StreamCredit && f.id === 5 && (cr5 = f));
    expect(metaGet(cr3, 'rpcd-compression') === undefined, 'a StreamOpen without the key got a first StreamCredit with it');
    c.send(streamSend(3, Buffer.from('garbage'), F_GZIP));
    const r = await waitFor(c, (f) => f.kind === K.StreamReset && f.id === 3, 'StreamReset of stream 3',
      (f) => (f.kind === K.StreamCredit && (f.id !== 5 || (cr5 = f))) || (f.id === 3 && f.kind === K.StreamEnd));
    expect(errCode(r) === C.InvalidArgument && r.flags === 0, `got ${describe(r)}; page: StreamReset InvalidArgument without Unprocessed`);
    const { rest } = await upload(c, 5, Buffer.alloc(10), 32768, cr5 ? cr5.payload.readUInt32BE(0) : undefined).catch((e) => { throw new Error(`the other stream: ${e.message}`); });
    expect(rest.length === 3 && rest[0].payload.readBigUInt64BE(0) === 10n, `the other stream after the reset: ${fmt(rest)}`);
  });

  // "| StreamData from the opener before the acceptor's first StreamCredit | must not be sent; the
  // acceptor counts it against the window it grants, and past it, protocol error |": within the
  // window it is counted, not refused. And "Hello and Welcome payloads are 4,096 bytes at most".
  await check('8 early StreamData within the window is counted; a Hello of 4,096 bytes is welcomed', async (open) => {
    let c = await open();
    c.send(streamOpen(1, 'Bench/StreamSink', 1024), streamSend(1, Buffer.alloc(1000, 1)), streamEnd(1));
    const d = await waitFor(c, (f) => f.kind === K.StreamData && f.id === 1, 'the count', (f) => f.kind === K.StreamCredit && f.id === 1);
    expect(d.payload.length === 8 && d.payload.readBigUInt64BE(0) === 1000n, `count ${describe(d)}; expected 1000`);
    c = await open();
    c.send(frame({ kind: K.Hello, payload: Buffer.alloc(4096, 0x41) }), req(1, 'Sys/Ping', '', RAW));
    const fs = [await c.frame(), await c.frame()];
    expect(fs[0].kind === K.Welcome && isResp(1, '"pong"')(fs[1]), `got ${fmt(fs)}`);
  });

  // Stream protocol errors from the edge-case table.
  await check('8 stream protocol errors', async (open) => {
    const cases = [
      ['StreamOpen with an even id', async (c) => { c.send(streamOpen(2, 'Bench/StreamSink', 1024)); }],
      ['StreamOpen with an id already open', async (c) => {
        c.send(streamOpen(1, 'Bench/StreamSink', 1024)); await waitFor(c, (f) => f.kind === K.StreamCredit, 'credit');
        c.send(streamOpen(1, 'Bench/StreamSink', 1024));
      }],
      ['StreamData past the credit', async (c) => {
        c.send(streamOpen(1, 'Bench/StreamSink', 1024)); const cr = await waitFor(c, (f) => f.kind === K.StreamCredit, 'credit');
        // One frame, one byte past the credit granted so far (the handler may grant more as it
        // reads, so the excess is sent in a single StreamData).
        c.send(streamSend(1, Buffer.alloc(cr.payload.readUInt32BE(0) + 1)));
      }],
      // The acceptor must not have finished the stream when the late frame arrives (a frame for a
      // finished stream is dropped), so its handler is held writing on a spent window.
      ['StreamData after the sender\'s StreamEnd', async (c) => {
        await sourceHeld(c, 1);
        c.send(streamEnd(1), streamSend(1, Buffer.from('late')));
      }],
      ['StreamCredit past 2^31-1', async (c) => {
        c.send(streamOpen(1, 'Bench/StreamSource', 0x7fffffff)); await waitFor(c, (f) => f.kind === K.StreamCredit, 'credit');
        c.send(streamCredit(1, 1));
      }],
      ['StreamOpen window 2^31', async (c) => { c.send(streamOpen(1, 'Bench/StreamSink', 0x80000000)); }],
      ['StreamEnd after the sender\'s StreamEnd', async (c) => {
        await sourceHeld(c, 1);
        c.send(streamEnd(1), streamEnd(1));
      }],
      // (The StreamOpen is taken before the data, so its StreamCredit may come first.)
      ['StreamData before the first StreamCredit, past the window', async (c) => { c.send(streamOpen(1, 'Bench/StreamSink', 1024), streamSend(1, Buffer.alloc(262145))); },
        [(f) => f.kind === K.StreamCredit && f.id === 1]],
      ['StreamData with codec JSON', async (c) => {
        c.send(streamOpen(1, 'Bench/StreamSink', 1024)); await waitFor(c, (f) => f.kind === K.StreamCredit, 'credit');
        c.send(frame({ kind: K.StreamData, id: 1, codec: JSONC, payload: '1' }));
      }],
      ['StreamOpen with a gzip flag', async (c) => { c.send(frame({ kind: K.StreamOpen, id: 1, route: 'Bench/StreamSink', flags: F_GZIP, payload: u32(1024) })); }],
      ['StreamOpen without a route', async (c) => { c.send(frame({ kind: K.StreamOpen, id: 1, payload: u32(1024) })); }],
      ['StreamCredit of 3 bytes', async (c) => {
        c.send(streamOpen(1, 'Bench/StreamSource', 1024)); await waitFor(c, (f) => f.kind === K.StreamCredit, 'credit');
        c.send(frame({ kind: K.StreamCredit, id: 1, payload: Buffer.from([0, 0, 1]) }));
      }],
      ['StreamCredit of 0', async (c) => {
        c.send(streamOpen(1, 'Bench/StreamSource', 1024)); await waitFor(c, (f) => f.kind === K.StreamCredit, 'credit');
        c.send(streamCredit(1, 0));
      }],
    ];
    const bad = [];
    for (const [what, go, before = []] of cases) {
      const c = await open();
      try {
        await go(c);
        await expectGoAway(c, { what, before });
      } catch (e) { bad.push(e.message); }
    }
    expect(bad.length === 0, bad.join(' | '));
  });

  // "Protocol errors": header and section rules. Each on its own connection, after one call so
  // that the GoAway must name it: "`last call id` is the greatest call id of the client's the
  // server took in".
  await check('8 header and section protocol errors', async (open) => {
    const cases = [
      ['bad magic', frame({ kind: K.Ping, magic: [0x52, 0x45] })],
      ['version 2', frame({ kind: K.Ping, version: 2 })],
      ['reserved kind 0x0D', frame({ kind: 0x0d })],
      ['reserved kind 0x20', frame({ kind: 0x20 })],
      ['reserved flag 0x08', req(2, 'Sys/Ping', '', RAW, { flags: 0x08 })],
      ['reserved field not 0', req(2, 'Sys/Ping', '', RAW, { reserved: 1 })],
      ['Request without a route', req(2, '', '', RAW)],
      ['Request with call id 0', req(0, 'Sys/Ping', '', RAW)],
      ['route byte 0x20', req(2, 'Sys/ Ping', '', RAW)],
      ['route of 257 bytes', req(2, 'x'.repeat(257), '', RAW)],
      ['route on a Ping', frame({ kind: K.Ping, route: 'Sys/Ping' })],
      ['metadata entry past the section', req(2, 'Sys/Ping', '', RAW, { metaRaw: Buffer.from([3, 0x61, 0x62, 0x63, 0, 5, 0x78]) })],
      ['metadata zero key length', req(2, 'Sys/Ping', '', RAW, { metaRaw: Buffer.from([0, 0, 0]) })],
      ['metadata key byte 0x20', req(2, 'Sys/Ping', '', RAW, { meta: [['a b', 'v']] })],
      ['metadata of 8,193 bytes', req(2, 'Sys/Ping', '', RAW, { meta: [['k', Buffer.alloc(8193 - 4)]] })],
      ['Error body of 1 byte', frame({ kind: K.Error, id: 9, payload: Buffer.from([5]) })],
      ['GoAway body of 5 bytes', frame({ kind: K.GoAway, payload: Buffer.alloc(5) })],
      ['Cancel with a payload', frame({ kind: K.Cancel, id: 9, payload: 'x' })],
      ['Cancel with call id 0', frame({ kind: K.Cancel, id: 0 })],
      ['Response with a deadline', frame({ kind: K.Response, id: 9, deadline: 5 })],
      ['Message sent to a server', frame({ kind: K.Message, id: 1, route: 'a.b' })],
      ['Hello payload of 4,097 bytes (as the first frame)', frame({ kind: K.Hello, payload: Buffer.alloc(4097) }), true],
      ['Ping with codec JSON', frame({ kind: K.Ping, codec: JSONC })],
      ['Subscribe pattern a..b', frame({ kind: K.Subscribe, id: 1, route: 'a..b' })],
      ['Subscribe pattern with > before the last token', frame({ kind: K.Subscribe, id: 1, route: 'a.>.b' })],
      ['Subscribe pattern with * inside a token', frame({ kind: K.Subscribe, id: 1, route: 'a.b*' })],
      ['Publish to a topic with a wildcard', frame({ kind: K.Publish, route: 'a.*' })],
      ['Publish to a topic with a trailing dot', frame({ kind: K.Publish, route: 'a.' })],
      ['Subscribe with an id already in use', Buffer.concat([frame({ kind: K.Subscribe, id: 1, route: 'a.b' }), frame({ kind: K.Subscribe, id: 1, route: 'c.d' })])],
      ['Unsubscribe with a 1-byte body', frame({ kind: K.Unsubscribe, id: 1, payload: Buffer.from([8]) })],
    ];
    const bad = [];
    await Promise.all(cases.map(async ([what, f, alone]) => {
      const c = await open();
      try {
        if (alone) { c.send(f); await expectGoAway(c, { what }); return; }
        c.send(req(1, 'Sys/Ping', '', RAW), f);
        await expectGoAway(c, { what, last: 1, before: [isResp(1, '"pong"')] });
      } catch (e) { bad.push(e.message); }
    }));
    expect(bad.length === 0, `${bad.length} of ${cases.length}: ${bad.join(' | ')}`);
  });

  // "| subscriptions | 1,024 | Unsubscribe `ResourceExhausted` |"; "It refuses one, for a limit
  // [...] by answering at once with an `Unsubscribe` for that id carrying an error body".
  await check('8 the 1,025th subscription is refused with an Unsubscribe ResourceExhausted', async (open) => {
    const c = await open();
    c.send(Buffer.concat(Array.from({ length: 1025 }, (_, i) => frame({ kind: K.Subscribe, id: i + 1, route: `edges.limit.s${i}` }))), req(1, 'Sys/Ping', '', RAW));
    const before = [];
    for (;;) { const f = await c.frame(); expect(f.type === 'frame', describe(f)); if (f.kind === K.Response) break; before.push(f); }
    expect(before.length === 1 && before[0].kind === K.Unsubscribe && before[0].id === 1025 && errCode(before[0]) === C.ResourceExhausted,
      `got ${fmt(before)} before the answer to the Request after them; page: Unsubscribe id 1025, ResourceExhausted`);
    log(`1,025th subscription: "${errMsg(before[0])}"`);
  });

  // "Closing": after its GoAway the server "shuts down its write side and reads and discards what
  // the other peer still sends for up to 2 s or 4 MiB, until that peer closes". A client that
  // neither closes nor stops: the server's socket is gone (our writes fail) after about 2 s, or
  // after 4 MiB.
  await check('8 lingering close lasts about 2 s, or 4 MiB', async (open) => {
    let c = await open();
    c.send(frame({ kind: K.Welcome }));
    let { frames, end } = await c.untilEnd(5000);
    expect(frames.length === 1 && isGoAway(frames[0]) && end === 'fin', `got ${fmt(frames)} then <${end}>`);
    const t0 = Date.now(); let failedAt = null;
    c.sock.on('error', () => { failedAt ??= Date.now() - t0; });
    c.sock.on('close', () => { failedAt ??= Date.now() - t0; });
    for (let t = 250; t <= 4000 && failedAt === null; t += 250) { await sleep(250); if (!c.sock.destroyed) c.send(ping('linger')); }
    expect(failedAt !== null && failedAt >= 1500 && failedAt <= 4000, `the server's socket went away ${failedAt ?? 'never (within 4 s)'} ms after its FIN; page: up to 2 s`);
    log(`lingering close: writes failed ${failedAt} ms after the FIN`);
    c = await open();
    c.send(frame({ kind: K.Welcome }));
    ({ frames, end } = await c.untilEnd(5000));
    const t1 = Date.now(); let failed2 = null;
    c.sock.on('error', () => { failed2 ??= Date.now() - t1; });
    c.sock.on('close', () => { failed2 ??= Date.now() - t1; });
    const junk = Buffer.alloc(1 << 20);
    for (let i = 0; i < 8 && failed2 === null; i++) { c.send(junk); await sleep(20); }
    await sleep(800);
    expect(failed2 !== null && failed2 < 1500, `after 8 MiB sent behind the GoAway, the server's socket ${failed2 === null ? 'was still there after ~1 s' : `went away after ${failed2} ms`}; page: up to 4 MiB`);
  });

  // Metadata: "Any kind may carry metadata"; "Keys may repeat"; values "0 to 65,535 [...] any
  // bytes"; the 8 KiB limit allows exactly 8,192.
  await check('8 metadata on calls and Pings is accepted', async (open) => {
    const c = await open();
    const meta = [['traceparent', '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'], ['tenant', 'acme'], ['tenant', 'other'], ['empty', ''], ['bin', Buffer.from([0, 255, 10])]];
    const r = await c.call(1, 'Bench/EchoPacket', 'ping', RAW, { meta });
    expect(isResp(1, 'ping')(r), describe(r));
    const r2 = await c.call(2, 'Sys/Ping', '', RAW, { meta: [['k', Buffer.alloc(8192 - 4)]] });
    expect(r2.kind === K.Response, `metadata of exactly 8,192 bytes: ${describe(r2)}`);
    c.send(frame({ kind: K.Ping, payload: 'm', meta: [['x-any', 'v']] }));
    const p = await c.frame();
    expect(p.kind === K.Pong && p.payload.toString() === 'm', describe(p));
  });

  // Publish and subscribe, on the default server: "A client's own subscriptions get its
  // publications like anyone's." "Frames are handled in order, so a client that wants to know
  // that its subscription is in place sends any Request after the Subscribe". The page does not
  // say whether the Message comes before the answer to a Ping sent after the Publish (rpcd's
  // comes after it), so the check waits for it.
  await check('8 publish to one\'s own subscription', async (open) => {
    const c = await open();
    c.send(frame({ kind: K.Subscribe, id: 1, route: 'edges.*.x' }), req(1, 'Sys/Ping', '', RAW));
    const r = await c.frame();
    expect(isResp(1, '"pong"')(r), `after a Subscribe: ${describe(r)}`);
    c.send(frame({ kind: K.Publish, route: 'edges.a.x', codec: JSONC, payload: '{"id":42}' }),
      frame({ kind: K.Publish, route: 'edges.a.y', payload: 'no' }));
    const before = await c.sync();
    for (;;) {
      const f = await c.frame(before.length ? 300 : 3000);
      if (f.type === 'timeout') break;
      before.push(f);
    }
    expect(before.length === 1 && before[0].kind === K.Message && before[0].id === 1 && before[0].route === 'edges.a.x'
      && before[0].payload.toString() === '{"id":42}' && before[0].codec === JSONC, `got ${fmt(before)}; expected one Message`);
  });
}

// Check 3's second half: every call written while nothing was read must be answered.
async function pipelinedEchoAnswers(c, n, size) {
  const got = new Set();
  for (;;) {
    if (got.size === n) break;
    const f = await c.frame(15000);
    expect(f.type === 'frame', `after ${got.size} of ${n} answers: ${describe(f)}`);
    expect(f.kind === K.Response && f.payload.equals(fill(f.id, size)) && !got.has(f.id), `answer ${got.size + 1}: ${describe(f)}`);
    got.add(f.id);
  }
}

async function halfCloseVerdict(frames, end, n, good) {
  const answers = frames.filter((f) => f.kind !== K.Ping);
  const pings = frames.filter((f) => f.kind === K.Ping);
  const ids = new Set(answers.map((f) => f.id));
  const badOnes = answers.filter((f) => !good(f));
  expect(badOnes.length === 0, `answers not as the page says: ${fmt(badOnes.slice(0, 3))}`);
  expect(ids.size === n && answers.length === n, `${answers.length} answers (${ids.size} distinct ids) of ${n}, then <${end}>; page: "answers every call it has read"`);
  expect(pings.length <= 1, `${pings.length} Pings after the FIN; page: "one Ping right after the FIN"`);
  expect(end === 'fin', `the connection ended by <${end}> after the answers; page: "once everything is answered and written, closes (its FIN)"`);
  log(`half-close: ${n} answers, ${pings.length} Ping(s)`);
}

const t0 = Date.now();
// Each check is bounded (CHECK_MS); this bounds the whole run against a server that hangs on all.
setTimeout(() => { console.log(`FAIL (script): the run took more than 240 s`); process.exit(1); }, 240000).unref();
main().catch((e) => { console.log(`FAIL (script): ${e.stack}`); results.push(false); }).finally(() => {
  for (const s of allSockets) s.destroy();
  const failed = results.filter((x) => !x).length;
  console.log(`${results.length - failed} ok, ${failed} failed, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  process.exit(failed ? 1 : 0);
});
