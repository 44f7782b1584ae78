// The client against a real `rpcd serve` ($RPCD_BIN), over each transport: TCP on its main port,
// this package's WebSocket client over node:net, and the platform's WebSocket when Node has one
// (Node 22, or Node 20 with --experimental-websocket), both at /ws on the gateway.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Code, Kind, RpcError, connectTransport, nodeWebSocketTransport, tcpTransport, webSocketTransport } from '../dist/node.js';
import { exercise } from './gen/out/use.js';
import { spy, startServer, tempFile, until } from './harness.mjs';

const enc = new TextEncoder();
const dec = new TextDecoder();

let main;
let secured;
before(async () => {
  const tokens = tempFile('tokens', 'tokA alice reader\ntokW wendy writer\n');
  [main, secured] = await Promise.all([
    startServer(),
    startServer(['-auth-tokens', tokens, '-auth-topics', 'pub:orders.>=writer;sub:orders.>=reader|writer']),
  ]);
});
after(async () => {
  const codes = await Promise.all([main?.stop(), secured?.stop()]);
  assert.deepEqual(codes, [0, 0], 'both servers drained and exited 0');
});

const transports = {
  tcp: (srv, o) => tcpTransport(srv.addr, o),
  'websocket (node:net)': (srv, o) => nodeWebSocketTransport(srv.ws, o),
};
if (typeof globalThis.WebSocket === 'function') transports['websocket (global WebSocket)'] = (srv, o) => webSocketTransport(srv.ws, o);
else test('the global WebSocket transport', { skip: 'this Node has no global WebSocket (Node 22 has; Node 20 with --experimental-websocket)' }, () => {});

const u64 = (n) => {
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, BigInt(n));
  return b;
};
const readU64 = (b) => Number(new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0));
const isErr = (code, unprocessed) => (e) => {
  assert.ok(e instanceof RpcError, `an RpcError, not ${e}`);
  assert.equal(e.code, code, e.message);
  if (unprocessed !== undefined) assert.equal(e.unprocessed, unprocessed, `Unprocessed of ${e.message}`);
  return true;
};

for (const [name, dial] of Object.entries(transports)) {
  describe(name, { timeout: 30_000 }, () => {
    const open = async (opts = {}, spyOpts) => {
      const t = await dial(opts.server ?? main, opts);
      const s = spyOpts === undefined ? t : spy(t, spyOpts);
      const c = await connectTransport(s, opts);
      return spyOpts === undefined ? c : { c, s };
    };

    test('calls to the routes of rpcd serve', async () => {
      const c = await open();
      assert.equal(await c.call('Math/Sum', { a: 1, b: 2 }), 3);
      assert.equal(await c.call('Sys/Ping'), 'pong');
      assert.equal(await c.call('Bench/EchoString', 'héllo'), 'héllo');
      assert.equal(await c.call('Bench/MultiArgs', { i32: 1, i64: 2, b: true, f64: 0.5, s: 'abc' }), 7.5);
      const routes = await c.call('Sys/Routes');
      assert.ok(routes.some((r) => r.name === 'Bench/StreamSink' && r.stream), JSON.stringify(routes));
      const bytes = Uint8Array.from({ length: 300 }, (_, i) => i & 0xff);
      const raw = await c.callRaw('Bench/EchoPacket', bytes);
      assert.deepEqual(raw.payload, bytes);
      assert.equal(raw.codec, 0);
      const labelled = await c.callRaw('Bench/EchoPacket', '"x"', { codec: 0x81 });
      assert.equal(labelled.codec, 0x81, 'a raw route answers in the codec of the Request');
      // Calls multiplexed: replies matched by id.
      const sums = await Promise.all(Array.from({ length: 500 }, (_, i) => c.call('Math/Sum', { a: i, b: 1 })));
      assert.deepEqual(sums, Array.from({ length: 500 }, (_, i) => i + 1));
      assert.ok((await c.ping('hi')) >= 0);
      c.close();
      assert.equal(await c.closed, undefined);
      await assert.rejects(c.call('Sys/Ping'), isErr(Code.Unavailable, true));
    });

    test('the module rpcd gen ts wrote for these routes (test/gen/api.ts): every route, typed', async () => {
      const c = await open();
      assert.equal(await exercise(c), 16);
      c.close();
    });

    test('errors carry the code, the message and the Unprocessed flag', async () => {
      const c = await open();
      await assert.rejects(c.call('No/Such'), (e) => isErr(Code.NotFound, true)(e) && e.message === 'rpcd: NotFound: no route No/Such' && e instanceof Error);
      await assert.rejects(c.call('Math/Sum', { a: 'x' }), isErr(Code.InvalidArgument, true));
      // int64 past 2^53: JavaScript numbers cannot say it, raw JSON text can.
      await assert.rejects(c.callRaw('Math/Sum', '{"a":9223372036854775807,"b":1}', { codec: 1 }), isErr(Code.OutOfRange, false));
      await assert.rejects(c.callRaw('Bench/EchoPacket', new Uint8Array(4 << 20)), isErr(Code.ResourceExhausted, true));
      assert.equal(await c.call('Math/Sum', { a: 2, b: 2 }), 4, 'the connection goes on');
      c.close();
    });

    test('a deadline travels in the frame; past it the client stops waiting and sends Cancel', async () => {
      let dropSum = false;
      const { c, s } = await open({}, { drop: (h) => dropSum && h.kind === Kind.Request });
      assert.equal(await c.call('Math/Sum', { a: 1, b: 1 }, { timeout: 5000 }), 2);
      const d = s.sent.at(-1).deadline;
      assert.ok(d > 4900 && d <= 5000, `deadline field ${d}`);
      dropSum = true; // the server never sees the next Request, so only the local deadline ends it
      const t0 = Date.now();
      await assert.rejects(c.call('Math/Sum', {}, { timeout: 50 }), isErr(Code.DeadlineExceeded, false));
      assert.ok(Date.now() - t0 < 1000);
      const req = s.sent.at(-2);
      assert.equal(s.sent.at(-1).kind, Kind.Cancel);
      assert.equal(s.sent.at(-1).id, req.id);
      dropSum = false;
      assert.equal(await c.call('Math/Sum', { a: 5 }), 5, 'a Cancel of an id never seen is ignored');
      c.close();
    });

    test('aborting a call rejects it with Canceled and sends Cancel', async () => {
      const { c, s } = await open({}, {});
      const ac = new AbortController();
      const p = c.call('Sys/Stats', undefined, { signal: ac.signal });
      ac.abort(new Error('user gave up'));
      await assert.rejects(p, (e) => isErr(Code.Canceled, false)(e) && e.cause.message === 'user gave up');
      assert.deepEqual(s.sent.slice(-2).map((h) => h.kind), [Kind.Request, Kind.Cancel]);
      await assert.rejects(c.call('Sys/Stats', undefined, { signal: ac.signal }), isErr(Code.Canceled, true));
      assert.equal(typeof (await c.call('Sys/Stats')).goroutines, 'number', 'its late answer was dropped');
      c.close();
    });

    test('one-way calls are never answered, even to no route', async () => {
      const { c, s } = await open({}, {});
      c.notify('Math/Sum', { a: 1 });
      c.notify('No/Such', 'x');
      c.notifyRaw('Bench/EchoPacket', 'raw');
      const ids = s.sent.map((h) => h.id);
      assert.equal(await c.call('Math/Sum', { a: 1, b: 1 }), 2);
      await c.flush();
      assert.deepEqual(s.received.filter((h) => ids.includes(h.id)), [], 'no frame answers a OneWay');
      c.close();
    });

    test('publish and subscribe with wildcards: iterator, callback, unsubscribe', async () => {
      const sub = await open();
      const pub = await open();
      const star = await sub.subscribe('orders.*.created');
      const got = [];
      const all = await sub.subscribe('orders.>', { onMessage: (m) => got.push(`${m.topic}=${m.text()}`) });
      pub.publish('orders.eu.created', { id: 42 });
      pub.publish('orders.eu', 1);
      pub.publish('orders.eu.x.created', 2);
      pub.publishRaw('orders.us.created', 'raw');
      pub.publish('other.eu.created', 3);
      await pub.flush();
      const it = star[Symbol.asyncIterator]();
      const m1 = (await it.next()).value;
      assert.equal(m1.topic, 'orders.eu.created');
      assert.deepEqual(m1.json(), { id: 42 });
      assert.equal(m1.isJSON, true);
      const m2 = (await it.next()).value;
      assert.deepEqual([m2.topic, m2.text(), m2.codec], ['orders.us.created', 'raw', 0]);
      await until(() => got.length === 4, 2000, 'four messages on orders.>');
      assert.deepEqual(got, ['orders.eu.created={"id":42}', 'orders.eu=1', 'orders.eu.x.created=2', 'orders.us.created=raw']);
      star.unsubscribe();
      assert.deepEqual(await it.next(), { done: true, value: undefined }, 'the iterator ends');
      assert.equal(await star.closed, undefined);
      pub.publish('orders.eu.created', { id: 43 });
      await pub.flush();
      await until(() => got.length === 5, 2000, 'the fifth message');
      await sub.flush();
      assert.equal(star.dropped, 0);
      all.unsubscribe();
      sub.close();
      pub.close();
    });

    test('a stream upload past the window: Bench/StreamSink counts what it read', async () => {
      const { c, s } = await open({}, {});
      const st = c.openStream('Bench/StreamSink');
      const data = new Uint8Array(1 << 20).fill(7);
      assert.equal(await st.write(data), true);
      st.closeWrite();
      assert.equal(readU64(await st.readAll()), 1 << 20);
      await st.done;
      const sentData = s.sent.filter((h) => h.kind === Kind.StreamData && h.id === st.id);
      assert.ok(sentData.every((h) => h.payloadLen <= 32768), 'StreamData of 32 KiB at most');
      const credits = s.received.filter((h) => h.kind === Kind.StreamCredit && h.id === st.id);
      assert.ok(credits.length > 1, 'the server granted credit more than once: 1 MiB is past its 256 KiB window');
      assert.equal(st.id % 2, 1, 'the client opens odd ids');
      c.close();
    });

    test('a stream download with a small window: Bench/StreamSource', async () => {
      const { c, s } = await open({}, {});
      const st = c.openStream('Bench/StreamSource', { window: 65536 });
      await st.write(u64(3_000_000));
      let n = 0;
      for await (const chunk of st) n += chunk.length;
      assert.equal(n, 3_000_000);
      await st.done;
      // The client granted the window, then what it read, and no more: the server could never
      // send past it (the client fails the connection on data past its credit).
      const grants = s.sent.filter((h) => h.kind === Kind.StreamCredit && h.id === st.id);
      const granted = 65536 + grants.reduce((a, h) => a + new DataView(h.bytes.buffer, h.bytes.byteOffset + 24).getUint32(0), 0);
      assert.ok(granted >= 3_000_000 && granted <= 3_000_000 + 65536, `granted ${granted} in ${grants.length} credits`);
      c.close();
    });

    test('streams that fail: refused, reset by the server, cancelled, past their deadline', async () => {
      const c = await open();
      const none = c.openStream('No/Such');
      await assert.rejects(none.done, isErr(Code.NotFound, true));
      await assert.rejects(none.write('x'), isErr(Code.NotFound, true));
      const short = c.openStream('Bench/StreamSource');
      await short.write(new Uint8Array(3));
      short.closeWrite();
      await assert.rejects(short.read(), isErr(Code.InvalidArgument, true));
      const ac = new AbortController();
      const cancelled = c.openStream('Bench/StreamSource', { signal: ac.signal });
      await cancelled.write(u64(1 << 30));
      assert.ok((await cancelled.read()).length > 0);
      ac.abort();
      await assert.rejects(cancelled.done, isErr(Code.Canceled));
      const slow = c.openStream('Bench/StreamSource', { window: 1024, timeout: 200 });
      await slow.write(u64(1 << 30)); // nothing read: the server waits for credit until the deadline
      await assert.rejects(slow.done, isErr(Code.DeadlineExceeded));
      assert.equal(await c.call('Math/Sum', { a: 1 }), 1, 'the connection goes on');
      c.close();
    });

    test('gzip: calls, replies and Messages travel compressed, expanded on arrival', async () => {
      const { c, s } = await open({ compression: 'gzip' }, {});
      assert.equal(c.compression, 'gzip', 'the Welcome names gzip');
      const big = JSON.stringify('abc'.repeat(10000));
      const r = await c.callRaw('Bench/EchoPacket', big, { codec: 1 });
      assert.equal(dec.decode(r.payload), big);
      const req = s.sent.find((h) => h.kind === Kind.Request && h.flags === 0x02);
      assert.ok(req && req.payloadLen < 1000, 'the Request went gzipped');
      assert.ok(s.received.some((h) => h.kind === Kind.Response && h.flags === 0x02), 'the Response came gzipped');
      assert.equal(await c.call('Bench/EchoString', 'short'), 'short', 'small payloads go as they are');
      const sub = await c.subscribe('logs.>');
      const item = { text: 'line '.repeat(1000) };
      c.publish('logs.app', item);
      const m = (await sub[Symbol.asyncIterator]().next()).value;
      assert.deepEqual(m.json(), item);
      assert.ok(s.received.some((h) => h.kind === Kind.Message && h.flags === 0x02), 'the Message came gzipped');
      c.close();
    });

    test('the Hello: a token names the identity; a wrong one, or none, is refused', async () => {
      const alice = await open({ server: secured, token: 'tokA', authMethod: 'token' });
      assert.equal(alice.identity, 'alice');
      assert.equal(await alice.call('Math/Sum', { a: 1, b: 2 }), 3);
      await assert.rejects(open({ server: secured, token: 'nope' }), isErr(Code.Unauthenticated, true));
      const anon = await open({ server: secured });
      await assert.rejects(anon.call('Math/Sum', {}), isErr(Code.Unauthenticated, true));
      assert.equal((await anon.closed).code, Code.Unauthenticated);
      alice.close();
    });

    test('topic permissions: a refused Publish comes back as Error id 0; a refused Subscribe rejects', async () => {
      const refused = [];
      const alice = await open({ server: secured, token: 'tokA', onPublishRefused: (e) => refused.push(e) });
      const wendy = await open({ server: secured, token: 'tokW' });
      const sub = await alice.subscribe('orders.>');
      await assert.rejects(alice.subscribe('secrets.>'), (e) => isErr(Code.PermissionDenied, true)(e) && /secrets/.test(e.message));
      alice.publish('orders.eu.created', 1);
      await alice.flush();
      assert.equal(refused.length, 1);
      assert.equal(alice.refusedPublishes, 1);
      isErr(Code.PermissionDenied, true)(refused[0]);
      assert.match(refused[0].message, /orders\.eu\.created/);
      wendy.publish('orders.eu.created', 2);
      const m = (await sub[Symbol.asyncIterator]().next()).value;
      assert.equal(m.json(), 2, "wendy's publish is delivered, alice's was not");
      alice.close();
      wendy.close();
    });
  });
}

test('a drain (SIGTERM): the client is told by GoAway, refuses new calls, and sees the close', { timeout: 30_000 }, async () => {
  const srv = await startServer();
  try {
    const clients = [];
    for (const [name, dial] of Object.entries(transports)) {
      const c = await connectTransport(await dial(srv, {}));
      assert.equal(await c.call('Math/Sum', { a: 1 }), 1, name);
      clients.push([name, c]);
    }
    const exit = srv.stop();
    for (const [name, c] of clients) {
      const why = await c.closed;
      assert.equal(why.code, Code.Unavailable, `${name}: ${why.message}`);
      assert.equal(c.goAway?.code, Code.Unavailable, `${name}: GoAway Unavailable`);
      await assert.rejects(c.call('Math/Sum', {}), isErr(Code.Unavailable, true));
    }
    assert.equal(await exit, 0);
  } finally {
    await srv.stop();
  }
});
