// Tests that need no server: the page's golden frames, and the client against a scripted peer
// (a fake transport) for what `rpcd serve` cannot make a server do: calls and pushes to the
// client, Cancels of them, streams the server opens, frames that break the protocol.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Code, connectTransport, RpcError } from '../dist/index.js';
import { gunzip } from '../dist/gzip.js';
import { encodeFrame, errorBody, FrameReader, goAwayBody, Kind, u32Body } from '../dist/wire.js';
import { until } from './harness.mjs';

const enc = new TextEncoder();
const dec = new TextDecoder();
const limits = { maxFrame: 4 << 20, maxRoute: 256, maxMetadata: 8192 };

// ----- The golden frames of proto/testdata/golden.txt, which protocol.md's examples are -----

function goldenBlocks() {
  const text = readFileSync(new URL('../../../proto/testdata/golden.txt', import.meta.url), 'utf8');
  const blocks = [];
  let cur = null;
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const i = line.indexOf(': ');
    const [k, v] = i < 0 ? [line.replace(/:$/, ''), ''] : [line.slice(0, i), line.slice(i + 2)];
    if (k === 'name') blocks.push((cur = { name: v, meta: [], hex: [] }));
    else if (k === 'meta') cur.meta.push(v.split(/=(.*)/s).slice(0, 2));
    else if (k === 'hex') cur.hex.push(v);
    else cur[k] = v;
  }
  for (const b of blocks) b.bytes = Uint8Array.from(b.hex.join(' ').split(/\s+/).filter(Boolean), (h) => parseInt(h, 16));
  return blocks;
}

const hexBytes = (s) => Uint8Array.from(s.split(/\s+/).filter(Boolean), (h) => parseInt(h, 16));
const flagBits = { Unprocessed: 0x01, gzip: 0x02, zstd: 0x04 };

test('golden frames decode to their fields and encode back to their bytes', async () => {
  const blocks = goldenBlocks();
  assert.ok(blocks.length >= 30, `only ${blocks.length} golden frames read`);
  for (const b of blocks) {
    // Fed one byte at a time: "not enough bytes yet" is not an error.
    const r = new FrameReader(limits);
    const frames = [];
    for (let i = 0; i < b.bytes.length; i++) frames.push(...r.push(b.bytes.subarray(i, i + 1)));
    assert.equal(frames.length, 1, b.name);
    const f = frames[0];
    assert.equal(f.kind, Kind[b.kind], `${b.name}: kind`);
    assert.equal(f.id, Number(b.id ?? 0), `${b.name}: id`);
    assert.equal(f.codec, { raw: 0, json: 1 }[b.codec ?? 'raw'], `${b.name}: codec`);
    assert.equal(f.route, b.route ?? '', `${b.name}: route`);
    assert.equal(f.deadline, Number(b.deadline ?? 0), `${b.name}: deadline`);
    const flags = (b.flags ?? '').split(/[ ,|]+/).filter(Boolean).reduce((a, n) => a | flagBits[n], 0);
    assert.equal(f.flags, flags, `${b.name}: flags`);
    assert.deepEqual(f.metadata.map(([k, v]) => [k, dec.decode(v)]), b.meta, `${b.name}: metadata`);
    let payload;
    if (b.code !== undefined && b.last !== undefined) payload = goAwayBody(Number(b.last), Number(b.code), b.message ?? '');
    else if (b.code !== undefined) payload = errorBody(Number(b.code), b.message ?? '');
    else if (b.window !== undefined) payload = u32Body(Number(b.window));
    else if (b.payloadhex !== undefined) payload = hexBytes(b.payloadhex);
    else payload = enc.encode(b.payload ?? '');
    assert.deepEqual(f.payload, payload, `${b.name}: payload`);
    if (b.expands !== undefined) assert.equal(dec.decode(await gunzip(f.payload, 1 << 20)), b.expands, `${b.name}: expanded`);
    const again = encodeFrame({ kind: f.kind, flags: f.flags, codec: f.codec, id: f.id, deadline: f.deadline, route: f.route, metadata: f.metadata, payload });
    assert.deepEqual(again, b.bytes, `${b.name}: re-encoded`);
  }
});

test('the reader refuses a header that breaks the rules before reading its body', () => {
  const bad = [
    ['bad magic', (h) => (h[0] = 0x53)],
    ['unknown version', (h) => (h[2] = 2)],
    ['reserved kind', (h) => (h[3] = 0x0d)],
    ['reserved header field', (h) => (h[19] = 1)],
    ['reserved flag', (h) => (h[4] = 0x08)],
    ['larger than the frame limit', (h) => new DataView(h.buffer).setUint32(20, 4 << 20)],
    ['with a route', (h) => new DataView(h.buffer).setUint16(6, 3)],
  ];
  for (const [what, mutate] of bad) {
    const h = encodeFrame({ kind: Kind.Response, id: 1 }).slice(0, 24);
    mutate(h);
    assert.throws(() => new FrameReader(limits).push(h), (e) => e.name === 'ProtocolError' && e.message.includes(what), what);
  }
});

// ----- A scripted peer -----

// fakeServer is a transport whose far end is the test: inject() sends the client a frame, and
// written holds the frames the client sent, decoded.
function fakeServer() {
  let events = null;
  const written = [];
  const reader = new FrameReader(limits);
  let closed = false;
  const t = {
    start(e) {
      events = e;
    },
    write(b) {
      written.push(...reader.push(b));
    },
    drain: async () => {},
    close() {
      if (closed) return;
      closed = true;
      events.close();
    },
  };
  return {
    t,
    written,
    inject: (f) => events.data(encodeFrame(f)),
    injectBytes: (b) => events.data(b),
    hangUp: (err) => {
      closed = true;
      events.close(err);
    },
    get closed() {
      return closed;
    },
    kinds: () => written.map((f) => f.kind),
    find: (kind, id) => written.find((f) => f.kind === kind && (id === undefined || f.id === id)),
  };
}

const json = (v) => enc.encode(JSON.stringify(v));

test('the server calls the client: JSON and raw handlers, NotFound, codecs and error codes', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  c.handle('Client/Double', (n, call) => {
    assert.equal(call.route, 'Client/Double');
    assert.equal(call.metadata.get('tenant'), 'acme');
    return n * 2;
  });
  c.handleRaw('Client/Upper', (p) => dec.decode(p).toUpperCase());
  c.handle('Client/Fail', () => {
    throw new RpcError(Code.FailedPrecondition, 'not now', true);
  });
  c.handle('Client/Throw', () => {
    throw new Error('plain');
  });
  c.handle('Client/Crash', () => null.x);
  s.inject({ kind: Kind.Request, id: 1, codec: 1, route: 'Client/Double', payload: json(21), metadata: [['tenant', enc.encode('acme')]] });
  s.inject({ kind: Kind.Request, id: 2 ** 31, codec: 0x80, route: 'Client/Upper', payload: enc.encode('a:42') });
  s.inject({ kind: Kind.Request, id: 3, codec: 1, route: 'No/Such' });
  s.inject({ kind: Kind.Request, id: 4, codec: 1, route: 'Client/Fail' });
  s.inject({ kind: Kind.Request, id: 5, codec: 1, route: 'Client/Throw' });
  s.inject({ kind: Kind.Request, id: 6, codec: 1, route: 'Client/Crash' });
  s.inject({ kind: Kind.Request, id: 7, codec: 0, route: 'Client/Double', payload: json(1) });
  s.inject({ kind: Kind.Request, id: 8, codec: 1, route: 'Client/Double', payload: enc.encode('{') });
  await until(() => s.written.length === 8, 2000, 'eight answers');
  const r1 = s.find(Kind.Response, 1);
  assert.equal(dec.decode(r1.payload), '42');
  assert.equal(r1.codec, 1);
  const r2 = s.find(Kind.Response, 2 ** 31);
  assert.equal(dec.decode(r2.payload), 'A:42');
  assert.equal(r2.codec, 0x80, 'a Response carries the codec of its Request');
  const errs = {
    3: [Code.NotFound, 1, 'no route No/Such'],
    4: [Code.FailedPrecondition, 1, 'not now'],
    5: [Code.Unknown, 0, 'plain'],
    6: [Code.Internal, 0, 'handler crashed: TypeError'],
    7: [Code.InvalidArgument, 1, 'takes JSON'],
    8: [Code.InvalidArgument, 1, 'not JSON'],
  };
  for (const [id, [code, flags, msg]] of Object.entries(errs)) {
    const e = s.find(Kind.Error, Number(id));
    assert.ok(e, `an Error for call ${id}`);
    assert.equal((e.payload[0] << 8) | e.payload[1], code, `call ${id}: code`);
    assert.equal(e.flags, flags, `call ${id}: Unprocessed flag`);
    assert.match(dec.decode(e.payload.subarray(2)), new RegExp(msg), `call ${id}: message`);
  }
  c.close();
});

test('pushes (OneWay) run their handler and are never answered, even to no route', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  const got = [];
  c.handle('News/Flash', (m, call) => {
    assert.equal(call.oneWay, true);
    got.push(m);
    return 'ignored';
  });
  s.inject({ kind: Kind.OneWay, id: 1, codec: 1, route: 'News/Flash', payload: json('a') });
  s.inject({ kind: Kind.OneWay, id: 2, codec: 1, route: 'News/Flash', payload: json('b') });
  s.inject({ kind: Kind.OneWay, id: 3, codec: 1, route: 'No/Such', payload: json('c') });
  s.inject({ kind: Kind.Ping, payload: enc.encode('sync') });
  await until(() => s.find(Kind.Pong) !== undefined, 2000, 'the Pong');
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(got, ['a', 'b']);
  assert.deepEqual(s.kinds(), [Kind.Pong], 'nothing but the Pong');
  assert.equal(dec.decode(s.find(Kind.Pong).payload), 'sync');
  c.close();
});

test("the server's Cancel and deadline abort the handler's signal", async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  const reasons = {};
  c.handle('Slow/Op', (_, call) => {
    return new Promise((_, reject) => {
      call.signal.addEventListener('abort', () => {
        reasons[call.id] = call.signal.reason;
        reject(call.signal.reason);
      });
    });
  });
  s.inject({ kind: Kind.Request, id: 1, codec: 1, route: 'Slow/Op' });
  s.inject({ kind: Kind.Request, id: 2, codec: 1, route: 'Slow/Op', deadline: 30 });
  s.inject({ kind: Kind.Request, id: 3, codec: 1, route: 'Slow/Op' });
  s.inject({ kind: Kind.Cancel, id: 3 }); // before its handler started: it never runs
  await until(() => s.written.length === 1, 2000, 'the answer to the call cancelled at once');
  s.inject({ kind: Kind.Cancel, id: 1 });
  s.inject({ kind: Kind.Cancel, id: 99 }); // never seen: ignored
  await until(() => s.written.length === 3, 2000, 'all three answers');
  assert.equal(reasons[1].code, Code.Canceled);
  assert.equal(reasons[2].code, Code.DeadlineExceeded);
  assert.equal(reasons[3], undefined, 'the handler of call 3 never ran');
  // Still answered, as rpcd does; the server drops the answers.
  const e = (id) => s.find(Kind.Error, id);
  assert.deepEqual([e(1).payload[1], e(1).flags], [Code.Canceled, 0]);
  assert.deepEqual([e(2).payload[1], e(2).flags], [Code.DeadlineExceeded, 0]);
  assert.deepEqual([e(3).payload[1], e(3).flags], [Code.Canceled, 1], 'Canceled with Unprocessed: it never ran');
  c.close();
});

test('a stream the server opens: credit, data both ways, the handler ends it with StreamReset 0', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t, { streamWindow: 1000 });
  let body = '';
  c.handleStream('Client/Upper', async (st, call) => {
    assert.equal(call.metadata.get('k'), 'v');
    for await (const chunk of st) body += dec.decode(chunk);
    await st.write(body.toUpperCase());
  });
  s.inject({ kind: Kind.StreamOpen, id: 2, route: 'Client/Upper', payload: u32Body(3), metadata: [['k', enc.encode('v')]] });
  s.inject({ kind: Kind.StreamOpen, id: 4, route: 'No/Such', payload: u32Body(3) });
  await until(() => s.written.length === 2, 2000, 'the credit and the refusal');
  assert.equal(s.written[0].kind, Kind.StreamCredit);
  assert.equal(new DataView(s.written[0].payload.buffer, s.written[0].payload.byteOffset).getUint32(0), 1000, 'the first credit grants the window');
  const refusal = s.find(Kind.StreamReset, 4);
  assert.equal(refusal.flags, 1);
  assert.equal(refusal.payload[1], Code.NotFound);
  // 600 bytes: more than a quarter of the window read, so the client grants them back.
  s.inject({ kind: Kind.StreamData, id: 2, payload: enc.encode('a'.repeat(600)) });
  await until(() => s.written.length === 3, 2000, 'the credit granted back');
  s.inject({ kind: Kind.StreamEnd, id: 2 });
  const u32 = (f) => new DataView(f.payload.buffer, f.payload.byteOffset).getUint32(0);
  const data = () => s.written.filter((f) => f.kind === Kind.StreamData && f.id === 2);
  await until(() => data().length === 1, 2000, 'data within the credit');
  const grant = s.written.find((f, i) => i > 0 && f.kind === Kind.StreamCredit && f.id === 2);
  assert.equal(grant && u32(grant), 600, 'credit granted back once read');
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(data().map((f) => f.payload.length), [3], 'the server granted 3 bytes: no more is sent');
  s.inject({ kind: Kind.StreamCredit, id: 2, payload: u32Body(597) });
  await until(() => s.find(Kind.StreamReset, 2) !== undefined, 2000, 'the end of the stream');
  assert.equal(data().map((f) => dec.decode(f.payload)).join(''), 'A'.repeat(600));
  const tail = s.written.filter((f) => f.id === 2).slice(-2).map((f) => f.kind);
  assert.deepEqual(tail, [Kind.StreamEnd, Kind.StreamReset], 'StreamEnd, then StreamReset');
  assert.deepEqual(Array.from(s.find(Kind.StreamReset, 2).payload), [0, 0], 'code 0: the handler succeeded');
  c.close();
});

test('a stream handler that throws resets the stream with its code', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  c.handleStream('Client/Refuse', () => {
    throw new RpcError(Code.PermissionDenied, 'no');
  });
  s.inject({ kind: Kind.StreamOpen, id: 2, route: 'Client/Refuse', payload: u32Body(10) });
  await until(() => s.find(Kind.StreamReset, 2) !== undefined, 2000, 'the reset');
  const r = s.find(Kind.StreamReset, 2);
  assert.equal(r.payload[1], Code.PermissionDenied);
  assert.equal(dec.decode(r.payload.subarray(2)), 'no');
  c.close();
});

test('a call: the deadline travels rounded up, the local deadline sends Cancel, abort sends Cancel', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  // The clock stands still while the call is sent: 40.3 ms left travels as 41.
  const realNow = Date.now;
  const t0 = realNow();
  Date.now = () => t0;
  let late;
  try {
    late = c.call('Slow/Op', { x: 1 }, { timeout: 40.3 });
  } finally {
    Date.now = realNow;
  }
  const req = s.find(Kind.Request);
  assert.equal(req.deadline, 41, 'rounded up');
  assert.equal(dec.decode(req.payload), '{"x":1}');
  await assert.rejects(late, (e) => e instanceof RpcError && e.code === Code.DeadlineExceeded && !e.unprocessed);
  assert.ok(s.find(Kind.Cancel, req.id), 'a Cancel follows the deadline');

  const ac = new AbortController();
  const cancelled = c.callRaw('Slow/Op', 'x', { signal: ac.signal });
  const req2 = s.written.at(-1);
  assert.equal(req2.kind, Kind.Request);
  ac.abort();
  await assert.rejects(cancelled, (e) => e.code === Code.Canceled && !e.unprocessed);
  assert.ok(s.find(Kind.Cancel, req2.id), 'a Cancel follows the abort');
  // The answer that crosses the Cancel is dropped; a later call is answered.
  s.inject({ kind: Kind.Response, id: req2.id, payload: enc.encode('late') });
  const third = c.callRaw('Fast/Op');
  s.inject({ kind: Kind.Response, id: s.written.at(-1).id, payload: enc.encode('ok') });
  assert.equal(dec.decode((await third).payload), 'ok');

  const n = s.written.length;
  await assert.rejects(c.call('X/Y', null, { deadline: Date.now() - 1 }), (e) => e.code === Code.DeadlineExceeded && e.unprocessed && /before X\/Y was sent/.test(e.message));
  await assert.rejects(c.call('X/Y', null, { signal: AbortSignal.abort() }), (e) => e.code === Code.Canceled && e.unprocessed);
  await assert.rejects(c.callRaw('X/Y', new Uint8Array(4 << 20)), (e) => e.code === Code.ResourceExhausted && e.unprocessed);
  await assert.rejects(c.call('bad route'), (e) => e.code === Code.InvalidArgument && e.unprocessed);
  assert.throws(() => c.publish('orders.*', 1), (e) => e.code === Code.InvalidArgument);
  await assert.rejects(c.subscribe('a..b'), (e) => e.code === Code.InvalidArgument);
  assert.equal(s.written.length, n, 'none of them was sent');
  c.close();
});

test('the errors both clients give alike (README, "Errors"): refusals of its own, a subscription refused or ended', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  const refused = (code) => (e) => e instanceof RpcError && e.code === code && e.unprocessed;
  const n = s.written.length;
  await assert.rejects(c.call('X/Y', null, { metadata: { k: 'v'.repeat(9000) } }), refused(Code.ResourceExhausted));
  await assert.rejects(c.call('X/Y', null, { metadata: { 'bad key': 'v' } }), refused(Code.InvalidArgument));
  await assert.rejects(c.call('X/' + 'y'.repeat(300)), refused(Code.InvalidArgument));
  await assert.rejects(c.call(''), refused(Code.InvalidArgument));
  assert.throws(() => c.notifyRaw('X/Y', new Uint8Array(4 << 20)), refused(Code.ResourceExhausted));
  assert.throws(() => c.publishRaw('big.topic', new Uint8Array(4 << 20)), refused(Code.ResourceExhausted));
  await assert.rejects(c.subscribe('a.>.b'), refused(Code.InvalidArgument));
  await assert.rejects(c.ping(new Uint8Array(65)), refused(Code.InvalidArgument));
  assert.throws(() => c.openStream('A/S', { window: -1 }), refused(Code.InvalidArgument));
  assert.equal(s.written.length, n, 'none of them was sent');

  const st = c.openStream('A/S');
  st.closeWrite();
  await assert.rejects(st.write('x'), (e) => e.code === Code.FailedPrecondition && !e.unprocessed);

  // A Subscribe refused (its Unsubscribe before it was taken in) never was in place: unprocessed.
  const no = c.subscribe('secrets.>');
  const sub1 = s.find(Kind.Subscribe);
  s.inject({ kind: Kind.Unsubscribe, id: sub1.id, payload: errorBody(Code.PermissionDenied, 'alice may not') });
  s.inject({ kind: Kind.Response, id: s.written.at(-1).id, payload: enc.encode('"pong"') });
  await assert.rejects(no, refused(Code.PermissionDenied));
  // One the server ends once it was in place was acted on: not unprocessed.
  const yes = c.subscribe('orders.>');
  await until(() => s.written.filter((f) => f.kind === Kind.Subscribe).length === 2);
  const sub2 = s.written.filter((f) => f.kind === Kind.Subscribe)[1];
  s.inject({ kind: Kind.Response, id: s.written.at(-1).id, payload: enc.encode('"pong"') });
  const live = await yes;
  s.inject({ kind: Kind.Unsubscribe, id: sub2.id, payload: errorBody(Code.PermissionDenied, 'no more') });
  const ended = await live.closed;
  assert.ok(ended.code === Code.PermissionDenied && !ended.unprocessed, ended.message);
  c.close();
});

test('the handshake: Hello with the token and compression, Welcome names the identity', async () => {
  const s = fakeServer();
  const p = connectTransport(s.t, { token: 's3cr3t-token', authMethod: 'token', compression: 'gzip' });
  await until(() => s.written.length === 1, 1000, 'the Hello');
  const h = s.written[0];
  assert.equal(h.kind, Kind.Hello);
  assert.equal(dec.decode(h.payload), 's3cr3t-token');
  assert.deepEqual(h.metadata.map(([k, v]) => [k, dec.decode(v)]), [['rpcd-auth-method', 'token'], ['rpcd-compression', 'gzip']]);
  s.inject({ kind: Kind.Welcome, payload: enc.encode('alice'), metadata: [['rpcd-compression', enc.encode('zstd, gzip')]] });
  const c = await p;
  assert.equal(c.identity, 'alice');
  assert.equal(c.compression, 'gzip');
  c.close();

  // setup registers handlers before any frame is read: a call right behind the Welcome, in the
  // same read, finds its handler.
  const s3 = fakeServer();
  const p3 = connectTransport(s3.t, { hello: true, setup: (cl) => cl.handle('Client/Hi', () => 'hi') });
  const welcomeAndCall = new Uint8Array([...encodeFrame({ kind: Kind.Welcome }), ...encodeFrame({ kind: Kind.Request, id: 1, codec: 1, route: 'Client/Hi' })]);
  s3.injectBytes(welcomeAndCall);
  const c3 = await p3;
  assert.equal(c3.identity, '');
  await until(() => s3.find(Kind.Response, 1) !== undefined, 1000, 'the answer');
  assert.equal(dec.decode(s3.find(Kind.Response, 1).payload), '"hi"');
  assert.equal(s3.written[0].kind, Kind.Hello, 'the Hello first');
  c3.close();

  const s2 = fakeServer();
  const p2 = connectTransport(s2.t, { token: 'wrong' });
  await until(() => s2.written.length === 1, 1000, 'the Hello');
  s2.inject({ kind: Kind.GoAway, payload: goAwayBody(0, Code.Unauthenticated, 'unknown token') });
  await assert.rejects(p2, (e) => e.code === Code.Unauthenticated && /unknown token/.test(e.message));
  assert.ok(s2.closed, 'the client closed the connection');
});

test('a GoAway: no new calls; at the close, calls after its last id are Unprocessed', async () => {
  const s = fakeServer();
  let told;
  const c = await connectTransport(s.t, { onGoAway: (g) => (told = g) });
  const a = c.callRaw('A/A');
  const b = c.callRaw('B/B');
  const [ida, idb] = s.written.map((f) => f.id);
  s.inject({ kind: Kind.GoAway, payload: goAwayBody(ida, Code.Unavailable, 'draining') });
  assert.deepEqual(told, { last: ida, code: Code.Unavailable, message: 'draining' });
  await assert.rejects(c.callRaw('C/C'), (e) => e.code === Code.Unavailable && e.unprocessed);
  s.hangUp();
  await assert.rejects(a, (e) => e.code === Code.Unavailable && !e.unprocessed, 'taken in: fate unknown');
  await assert.rejects(b, (e) => e.code === Code.Unavailable && e.unprocessed, 'after last: never ran');
  assert.equal((await c.closed).code, Code.Unavailable);
  assert.ok(idb > ida);
});

test('a frame that breaks the protocol: GoAway Internal naming the rule, then the close', async () => {
  const cases = [
    ['a Subscribe sent to a client', { kind: Kind.Subscribe, id: 1, route: 'a.b' }, 'Subscribe sent to a client'],
    ['a Response with a deadline', { kind: Kind.Response, id: 1, deadline: 5 }, 'with a deadline'],
    ['a StreamReset with code 0 from the opener', { kind: Kind.StreamReset, id: 2, payload: errorBody(0, '') }, 'code 0 from the stream opener'],
    ['a Message to a malformed topic', { kind: Kind.Message, id: 1, route: 'a.*' }, 'malformed topic'],
    ['a Welcome not asked for', { kind: Kind.Welcome }, 'did not ask for'],
  ];
  for (const [what, frame, rule] of cases) {
    const s = fakeServer();
    const c = await connectTransport(s.t);
    const pending = c.callRaw('A/A');
    s.inject({ kind: Kind.Request, id: 7, codec: 0, route: 'No/Such' }); // the server's call id 7
    s.inject(frame);
    const g = s.find(Kind.GoAway);
    assert.ok(g, `${what}: a GoAway`);
    assert.equal(new DataView(g.payload.buffer, g.payload.byteOffset).getUint32(0), 7, `${what}: the last call of the server's taken in`);
    assert.equal(g.payload[5], Code.Internal, what);
    assert.match(dec.decode(g.payload.subarray(6)), new RegExp(rule), what);
    assert.ok(s.closed, `${what}: closed`);
    await assert.rejects(pending, (e) => e.code === Code.Unavailable && !e.unprocessed && /protocol error/.test(e.message), what);
    assert.equal((await c.closed).code, Code.Internal, `${what}: closed with the reason`);
  }
});

test('bytes in any chunking make the same frames, and a Ping is answered', async () => {
  const s = fakeServer();
  const c = await connectTransport(s.t);
  const p = c.callRaw('A/A');
  const id = s.written[0].id;
  const bytes = new Uint8Array([...encodeFrame({ kind: Kind.Ping, payload: enc.encode('12345678') }), ...encodeFrame({ kind: Kind.Response, id, payload: enc.encode('ok') })]);
  for (let i = 0; i < bytes.length; i += 5) s.injectBytes(bytes.subarray(i, i + 5));
  assert.equal(dec.decode((await p).payload), 'ok');
  assert.equal(dec.decode(s.find(Kind.Pong).payload), '12345678');
  c.close();
});

// ----- connect against a server that takes the connection and never answers -----

test('connect gives up after handshakeTimeout when the upgrade or the Welcome never comes', { timeout: 20_000 }, async () => {
  const { connect } = await import('../dist/node.js');
  const net = await import('node:net');
  const socks = new Set();
  const mute = net.createServer((s) => socks.add(s)); // accepts, reads, never writes
  await new Promise((r) => mute.listen(0, '127.0.0.1', r));
  const addr = `127.0.0.1:${mute.address().port}`;
  try {
    for (const [target, opts] of [
      [`ws://${addr}/ws`, {}],
      [`ws://${addr}/ws`, { token: 'x' }],
      [addr, { token: 'x' }],
    ]) {
      const t0 = Date.now();
      await assert.rejects(connect(target, { ...opts, handshakeTimeout: 300 }), (err) => {
        assert.ok(err instanceof RpcError && err.code === Code.DeadlineExceeded, `${target}: ${err}`);
        return true;
      });
      const took = Date.now() - t0;
      assert.ok(took >= 250 && took < 5000, `${target} ${JSON.stringify(opts)}: gave up after ${took} ms, want about 300`);
    }
    // Aborting the caller's signal ends the opening too, as itself.
    const ac = new AbortController();
    const p = connect(`ws://${addr}/ws`, { signal: ac.signal });
    ac.abort();
    await assert.rejects(p, (err) => !(err instanceof RpcError && err.code === Code.DeadlineExceeded));
  } finally {
    for (const s of socks) s.destroy();
    await new Promise((r) => mute.close(r));
  }
});
