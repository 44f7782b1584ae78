// A client of rpcd's gateway as a web developer makes one: types generated
// from the gateway's /openapi.json by openapi-typescript (default options),
// calls made through openapi-fetch. gateway/openapicheck's TestTypedClient
// generates gen/api.d.ts beside this file, compiles it with tsc --strict
// and runs it against a gateway: `node dist/client.js BASE_URL` prints one
// line per check and exits non-zero if one fails.

import createClient from 'openapi-fetch';
import type { paths } from './gen/api.js';

declare const process: { argv: string[]; exitCode?: number };

const client = createClient<paths>({ baseUrl: process.argv[2] });
let failed = 0;

function check(name: string, ok: boolean, got: unknown): void {
  console.log(`${ok ? 'ok' : 'FAIL'} ${name}${ok ? '' : `: got ${JSON.stringify(got)}`}`);
  if (!ok) failed++;
}

// POST /rpc/Math/Sum: the body and the reply typed from the route's schemas.
const sum = await client.POST('/rpc/Math/Sum', { body: { a: 1, b: 2 } });
const three: number | undefined = sum.data;
check('/rpc/Math/Sum', sum.response.status === 200 && three === 3, sum.data);

// An error, typed as the document's rpcd.Error.
const bad = await client.POST('/rpc/Math/Sum', { body: { a: 1, b: 2 }, params: { header: { 'Rpcd-Timeout': 'soon' } } });
const code: string | undefined = bad.error?.code;
check('/rpc/Math/Sum with a bad Rpcd-Timeout', bad.response.status === 400 && code === 'InvalidArgument', bad.error);

// JSON-RPC, as gateway.md's curl example sends it: params an object.
const rpc = await client.POST('/jsonrpc', {
  body: { jsonrpc: '2.0', method: 'Math/Sum', params: { a: 1, b: 2 }, id: 1 },
});
const one = Array.isArray(rpc.data) ? undefined : rpc.data;
check('/jsonrpc, params an object', rpc.response.status === 200 && one?.result === 3 && one.id === 1, rpc.data);

// A batch, params by position, and an error object with rpcd's code.
const batch = await client.POST('/jsonrpc', {
  body: [
    { jsonrpc: '2.0', method: 'Math/Sum', params: [{ a: 2, b: 3 }], id: 'x' },
    { jsonrpc: '2.0', method: 'Math/Sum', params: { a: 'no' }, id: 2 },
  ],
});
const [first, second] = Array.isArray(batch.data) ? batch.data : [];
check('/jsonrpc, a batch', first?.result === 5 && second?.error?.code === -32602 && second.error.data?.name === 'InvalidArgument', batch.data);

// What the types refuse, as the server would (tsc fails if one compiles).
export function refused(): void {
  // @ts-expect-error: a is a number
  void client.POST('/rpc/Math/Sum', { body: { a: 'one', b: 2 } });
  // @ts-expect-error: no such route
  void client.POST('/rpc/Math/Product', { body: { a: 1, b: 2 } });
  // @ts-expect-error: method is one of the routes
  void client.POST('/jsonrpc', { body: { jsonrpc: '2.0', method: 'No/Such', id: 3 } });
  // @ts-expect-error: jsonrpc is "2.0"
  void client.POST('/jsonrpc', { body: { jsonrpc: '1.0', method: 'Math/Sum', id: 4 } });
}

process.exitCode = failed ? 1 : 0;
