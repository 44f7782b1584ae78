// The server's calls, pushes and streams to the client, against the in-process server of
// reverse_test.go (go test ./clients/ts runs this file with $RPCD_TS_TCP and $RPCD_TS_WS):
// its routes Test/CallMeBack, Test/Push and Test/StreamToClient make the server call back.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Code, RpcError, connect, webSocketTransport, connectTransport } from '../dist/node.js';
import { until } from './harness.mjs';

const tcp = process.env.RPCD_TS_TCP;
const ws = process.env.RPCD_TS_WS;
const b64 = (s) => Buffer.from(s).toString('base64');
const text = (b64s) => Buffer.from(b64s ?? '', 'base64').toString();

const targets = { tcp: () => connect(tcp), 'websocket (node:net)': () => connect(ws) };
if (typeof globalThis.WebSocket === 'function') targets['websocket (global WebSocket)'] = async () => connectTransport(await webSocketTransport(ws));

for (const [name, dial] of Object.entries(targets)) {
  describe(name, { timeout: 30_000, skip: tcp && ws ? false : 'run by go test ./clients/ts, which sets RPCD_TS_TCP and RPCD_TS_WS' }, () => {
    // A client the test closes however it ends, so that a failure leaves nothing open.
    const open = async (t) => {
      const c = await dial();
      t.after(() => c.close());
      return c;
    };

    test('the server calls handlers of the client: JSON, raw, no route, an error', async (t) => {
      const c = await open(t);
      c.handle('Client/Double', (n, call) => {
        assert.equal(call.codec, 1);
        return n * 2;
      });
      c.handleRaw('Client/Upper', (p) => Buffer.from(p).toString().toUpperCase());
      c.handle('Client/Refuse', () => {
        throw new RpcError(Code.PermissionDenied, 'not for you');
      });
      const dbl = await c.call('Test/CallMeBack', { route: 'Client/Double', payload: b64('21'), json: true });
      assert.deepEqual([text(dbl.reply), dbl.code], ['42', 0]);
      const up = await c.call('Test/CallMeBack', { route: 'Client/Upper', payload: b64('a:42') });
      assert.equal(text(up.reply), 'A:42');
      const none = await c.call('Test/CallMeBack', { route: 'No/Such', payload: b64('x') });
      assert.deepEqual([none.code, none.unprocessed], [Code.NotFound, true]);
      assert.match(none.message, /no route No\/Such/);
      const refused = await c.call('Test/CallMeBack', { route: 'Client/Refuse', json: true, payload: b64('{}') });
      assert.deepEqual([refused.code, refused.message, refused.unprocessed], [Code.PermissionDenied, 'not for you', false]);
    });

    test("the server's deadline and Cancel reach the handler's signal", async (t) => {
      const c = await open(t);
      const reasons = [];
      const deadlines = [];
      c.handle('Client/Wait', (_, call) => {
        deadlines.push(call.deadline === undefined ? undefined : call.deadline - Date.now());
        return new Promise((_, reject) => {
          const stop = () => {
            reasons.push(call.signal.reason.code);
            reject(call.signal.reason);
          };
          if (call.signal.aborted) stop();
          else call.signal.addEventListener('abort', stop);
        });
      });
      const late = await c.call('Test/CallMeBack', { route: 'Client/Wait', json: true, payload: b64('1'), deadline_ms: 50 });
      assert.equal(late.code, Code.DeadlineExceeded);
      const cancelled = await c.call('Test/CallMeBack', { route: 'Client/Wait', json: true, payload: b64('1'), cancel_after_ms: 30 });
      assert.equal(cancelled.code, Code.Canceled);
      await until(() => reasons.length === 2, 2000, 'both handlers stopped');
      assert.ok(deadlines[0] > 0 && deadlines[0] <= 50, `the first call's deadline: ${deadlines[0]} ms left`);
      assert.equal(deadlines[1], undefined, 'the second call has none');
      // At the deadline both ends act: the client's timer, and the server's Cancel, whichever comes first.
      assert.ok([Code.DeadlineExceeded, Code.Canceled].includes(reasons[0]), `first reason ${reasons[0]}`);
      assert.equal(reasons[1], Code.Canceled);
    });

    test('pushes (OneWay) reach the handler in order and are not answered', async (t) => {
      const c = await open(t);
      const got = [];
      c.handle('News/Flash', (v, call) => {
        assert.equal(call.oneWay, true);
        got.push(v);
      });
      c.handleRaw('News/Raw', (p) => {
        got.push(Buffer.from(p).toString());
      });
      assert.equal(await c.call('Test/Push', { route: 'News/Flash', json: true, payloads: ['"a"', '"b"', '{"c":1}'].map(b64) }), 3);
      assert.equal(await c.call('Test/Push', { route: 'News/Raw', payloads: ['x', 'y'].map(b64) }), 2);
      assert.equal(await c.call('Test/Push', { route: 'No/Such', payloads: ['z'].map(b64) }), 1);
      await until(() => got.length === 5, 2000, 'five pushes');
      assert.deepEqual(got, ['a', 'b', { c: 1 }, 'x', 'y']);
    });

    test('a stream the server opens to the client, both ways, past the window', async (t) => {
      const c = await open(t);
      c.handleStream('Client/Upper', async (st) => {
        let n = 0;
        let s = '';
        for await (const chunk of st) {
          n += chunk.length;
          s = Buffer.from(chunk).toString().slice(0, 1);
        }
        await st.write(`${s.toUpperCase()}:${n}`);
      });
      const data = 'q'.repeat(600 * 1024); // past the client's 256 KiB window: credit granted back as read
      const r = await c.call('Test/StreamToClient', { route: 'Client/Upper', data: b64(data) });
      assert.deepEqual([text(r.reply), r.code], [`Q:${data.length}`, 0]);
      const none = await c.call('Test/StreamToClient', { route: 'No/Such', data: b64('x') });
      assert.deepEqual([none.code, none.unprocessed], [Code.NotFound, true]);
    });
  });
}
