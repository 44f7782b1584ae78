// Code that uses the module rpcd gen ts wrote for rpcd serve's routes (api.ts, beside this file),
// compiled with tsc --strict (tsconfig.gen.json): exercise runs in Node (test/server.test.mjs)
// and in Chromium (test/page.js) against rpcd serve; mistakes must not compile.

import { Code, RpcError, type Client } from '@rpcd/client';
import { bind, type Api, type Description, type RouteInfo, type StatsReply, type SumArgs } from './api.js';

function check(cond: boolean, what: string): void {
  if (!cond) throw new Error(`check failed: ${what}`);
}

/** exercise calls every route of rpcd serve through the typed facade; it throws at the first answer that is wrong. */
export async function exercise(client: Client): Promise<number> {
  const api: Api = bind(client);
  let checks = 0;
  const ok = (cond: boolean, what: string) => {
    check(cond, what);
    checks++;
  };

  const args: SumArgs = { a: 1, b: 2 };
  const sum: number = await api.Math.Sum(args);
  ok(sum === 3, `Math.Sum 1+2 is ${sum}`);
  ok((await api.Math.Sum()) === 0, 'no argument is the zero value');
  ok((await api.Math.Sum({ b: 5 }, { timeout: 5000 })) === 5, 'a field left out is 0');
  ok((await api.Bench.EchoString('héllo')) === 'héllo', 'Bench.EchoString');
  ok((await api.Bench.MultiArgs({ i32: 1, i64: 2, b: true, f64: 0.5, s: 'abc' })) === 7.5, 'Bench.MultiArgs');

  const routes: RouteInfo[] | null = await api.Sys.Routes();
  ok(routes !== null && routes.some((r) => r.name === 'Bench/StreamSink' && r.stream === true), 'Sys.Routes names the stream routes');
  const one: Description[] | null = await api.Sys.Describe({ route: 'Math/Sum' });
  ok(one?.length === 1 && one[0]?.kind === 'typed' && one[0].argument?.['title'] === 'builtin.SumArgs', 'Sys.Describe of one route');
  const all = await api.Sys.Describe('');
  ok((all ?? []).length === (routes ?? []).length, 'Sys.Describe of every route');
  const stats: StatsReply = await api.Sys.Stats();
  ok(typeof stats.goroutines === 'number' && stats.conns >= 1, 'Sys.Stats');

  const pong = await api.Sys.Ping();
  ok(new TextDecoder().decode(pong.payload) === '"pong"', 'Sys.Ping, raw');
  const echo = await api.Bench.EchoPacket(new Uint8Array([0, 1, 255]), { codec: 0x81 });
  ok(echo.payload.length === 3 && echo.payload[2] === 255 && echo.codec === 0x81, 'Bench.EchoPacket, raw, in its codec');
  ok(new TextDecoder().decode((await api.Bench.NoArg()).payload) === '42', 'Bench.NoArg');

  const sink = api.Bench.StreamSink();
  await sink.write(new Uint8Array(300_000));
  sink.closeWrite();
  const counted = await sink.readAll();
  ok(new DataView(counted.buffer, counted.byteOffset, 8).getBigUint64(0) === 300_000n, 'Bench.StreamSink counted the upload');
  await sink.done;
  const source = api.Bench.StreamSource({ window: 65536 });
  const size = new Uint8Array(8);
  new DataView(size.buffer).setBigUint64(0, 100_000n);
  await source.write(size);
  ok((await source.readAll()).length === 100_000, 'Bench.StreamSource sent what was asked');

  try {
    await api.Math.Sum({ a: 9007199254740991, b: 9007199254740991 });
    ok(true, 'within int64');
    await client.callRaw('Math/Sum', '{"a":9223372036854775807,"b":1}', { codec: 1 });
    ok(false, 'an overflow fails');
  } catch (e) {
    ok(e instanceof RpcError && e.code === Code.OutOfRange && !e.unprocessed, `the server's error comes as it is: ${String(e)}`);
  }
  return checks;
}

/** mistakes is never run: each of its lines must fail to type-check, or tsc fails the build. */
export async function mistakes(api: Api): Promise<void> {
  // @ts-expect-error a string is no int64
  await api.Math.Sum({ a: 'x' });
  // @ts-expect-error SumArgs has no field c
  await api.Math.Sum({ c: 1 });
  // @ts-expect-error the reply is a number
  const s: string = await api.Math.Sum({ a: 1 });
  // @ts-expect-error there is no route Math/Product
  await api.Math.Product({ a: 1 });
  // @ts-expect-error a raw route takes bytes, not an object
  await api.Sys.Ping({ a: 1 });
  // @ts-expect-error a stream route answers a Stream, not a promise of a number
  const n: number = await api.Bench.StreamSink().done;
  // @ts-expect-error the routes may be null: Sys.Routes answers RouteInfo[] | null
  const first: RouteInfo = (await api.Sys.Routes())[0];
  void [s, n, first];
}
