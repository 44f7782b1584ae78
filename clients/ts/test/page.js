// The checks browser.test.mjs runs in headless Chromium: the browser entry, over the browser's own
// WebSocket, against `rpcd serve`'s gateway (?ws=ws://host:port/ws). Each check's outcome goes to
// window.results.

import { Code, connect, connectTransport, Kind, RpcError, webSocketTransport } from '../dist/index.js';
import { exercise } from './gen/out/use.js';

const ws = new URLSearchParams(location.search).get('ws');
const results = [];
const dec = new TextDecoder();

function assert(cond, what) {
  if (!cond) throw new Error(`check failed: ${what}`);
}

async function rejects(p, code, unprocessed, what) {
  try {
    await p;
  } catch (e) {
    assert(e instanceof RpcError, `${what}: an RpcError, got ${e}`);
    assert(e.code === code, `${what}: code ${e.code} (${e.message}), want ${code}`);
    if (unprocessed !== undefined) assert(e.unprocessed === unprocessed, `${what}: unprocessed ${e.unprocessed}`);
    return e;
  }
  throw new Error(`${what}: did not fail`);
}

async function check(name, fn) {
  try {
    await fn();
    results.push({ name, ok: true });
  } catch (e) {
    results.push({ name, ok: false, error: String(e?.stack ?? e) });
  }
}

// A transport that counts the compressed frames going each way.
function counting(t) {
  const seen = { out: 0, in: 0 };
  return {
    seen,
    start(events) {
      t.start({
        data(chunk) {
          if (chunk[4] & 0x06) seen.in++; // rpcd sends one frame a message
          events.data(chunk);
        },
        close: (err) => events.close(err),
      });
    },
    write(f) {
      if (f[4] & 0x06) seen.out++;
      t.write(f);
    },
    drain: () => t.drain(),
    close: () => t.close(),
  };
}

const u64 = (n) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
};

await check('a call over the browser WebSocket', async () => {
  const c = await connect(ws);
  assert((await c.call('Math/Sum', { a: 1, b: 2 })) === 3, 'Math/Sum 1+2');
  assert((await c.call('Bench/EchoString', 'héllo')) === 'héllo', 'EchoString');
  const r = await c.callRaw('Bench/EchoPacket', new Uint8Array([0, 1, 255]));
  assert(r.payload.length === 3 && r.payload[2] === 255, 'raw bytes');
  const sums = await Promise.all(Array.from({ length: 200 }, (_, i) => c.call('Math/Sum', { a: i })));
  assert(sums.every((v, i) => v === i), 'calls multiplexed');
  assert((await c.ping('x')) >= 0, 'ping');
  c.close();
});

await check('the module rpcd gen ts wrote for these routes: every route, typed', async () => {
  const c = await connect(ws);
  const checks = await exercise(c);
  assert(checks === 16, `${checks} checks`);
  c.close();
});

await check('errors, deadlines, cancel and one-way calls', async () => {
  const c = await connect(ws);
  const e = await rejects(c.call('No/Such'), Code.NotFound, true, 'no route');
  assert(e instanceof Error && e.message === 'rpcd: NotFound: no route No/Such', e.message);
  await rejects(c.call('Math/Sum', { a: 'x' }), Code.InvalidArgument, true, 'bad argument');
  await rejects(c.call('Math/Sum', {}, { deadline: Date.now() - 1 }), Code.DeadlineExceeded, true, 'deadline passed before sending');
  assert((await c.call('Math/Sum', { a: 2 }, { timeout: 5000 })) === 2, 'a call within its deadline');
  const ac = new AbortController();
  const p = c.call('Sys/Stats', undefined, { signal: ac.signal });
  ac.abort();
  await rejects(p, Code.Canceled, false, 'aborted');
  c.notify('Math/Sum', { a: 1 });
  c.notify('No/Such');
  assert((await c.call('Math/Sum', { a: 3 })) === 3, 'the connection goes on');
  c.close();
});

await check('publish and subscribe: iterator, callback, wildcards, unsubscribe', async () => {
  const c = await connect(ws);
  const star = await c.subscribe('orders.*.created');
  const got = [];
  const all = await c.subscribe('orders.>', { onMessage: (m) => got.push(m.topic) });
  c.publish('orders.eu.created', { id: 42 });
  c.publish('orders.eu', 1);
  await c.flush();
  const m = (await star[Symbol.asyncIterator]().next()).value;
  assert(m.topic === 'orders.eu.created' && m.json().id === 42, 'the message on orders.*.created');
  for (let i = 0; i < 100 && got.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
  assert(got.join() === 'orders.eu.created,orders.eu', `orders.> got ${got}`);
  star.unsubscribe();
  all.unsubscribe();
  assert((await star.closed) === undefined, 'unsubscribed');
  c.close();
});

await check('streams: an upload past the window and a download with a small one', async () => {
  const c = await connect(ws);
  const sink = c.openStream('Bench/StreamSink');
  await sink.write(new Uint8Array(1 << 20));
  sink.closeWrite();
  const n = await sink.readAll();
  assert(new DataView(n.buffer, n.byteOffset).getBigUint64(0) === BigInt(1 << 20), 'StreamSink counted 1 MiB');
  await sink.done;
  const src = c.openStream('Bench/StreamSource', { window: 65536 });
  await src.write(u64(1_000_000));
  let got = 0;
  for await (const chunk of src) got += chunk.length;
  assert(got === 1_000_000, `read ${got}`);
  await src.done;
  const none = c.openStream('No/Such');
  await rejects(none.done, Code.NotFound, true, 'no stream route');
  c.close();
});

await check('gzip through CompressionStream: a call, its reply and a Message', async () => {
  const t = counting(await webSocketTransport(ws));
  const c = await connectTransport(t, { compression: 'gzip' });
  assert(c.compression === 'gzip', 'the Welcome names gzip');
  const big = JSON.stringify('abc'.repeat(10000));
  const r = await c.callRaw('Bench/EchoPacket', big, { codec: 1 });
  assert(dec.decode(r.payload) === big, 'the echo expanded');
  assert(t.seen.out === 1 && t.seen.in === 1, `compressed frames out ${t.seen.out}, in ${t.seen.in}`);
  const sub = await c.subscribe('logs.>');
  c.publish('logs.app', { text: 'line '.repeat(1000) });
  const m = (await sub[Symbol.asyncIterator]().next()).value;
  assert(m.json().text.length === 5000, 'the Message expanded');
  assert(t.seen.in === 2, 'the Message came compressed');
  c.close();
});

await check('a frame kind a client never gets is a protocol error (GoAway Internal)', async () => {
  // A transport whose peer is this check, sending a Subscribe, which no server sends a client.
  let events;
  const written = [];
  const c = await connectTransport({ start: (e) => (events = e), write: (f) => written.push(f), drain: async () => {}, close: () => events.close() });
  const p = c.call('A/B');
  const sub = new Uint8Array(24 + 3);
  sub.set([0x52, 0x44, 1, Kind.Subscribe, 0, 0, 0, 3, 0, 0, 0, 1]);
  sub.set([0x61, 0x2e, 0x62], 24);
  events.data(sub);
  await rejects(p, Code.Unavailable, false, 'the pending call: the connection is lost');
  const g = written.at(-1);
  assert(g[3] === Kind.GoAway && g[29] === Code.Internal, 'a GoAway Internal went out');
});

window.results = results;
document.getElementById('out').textContent = JSON.stringify(results, null, 1);
