// Small helpers of the client.

import { Code, RpcError } from './errors.js';
import type { CallOptions } from './types.js';
import { MAX_ROUTE, printable } from './wire.js';

// A frame that could not be made is a bug of this package: reported as an uncaught error, and the
// frames queued after it still go out.
export function bug(err: unknown): void {
  queueMicrotask(() => {
    throw err;
  });
}

export function checkRoute(route: string): void {
  if (route.length < 1 || route.length > MAX_ROUTE || !printable(route)) {
    throw new RpcError(Code.InvalidArgument, `bad route ${JSON.stringify(route)}: 1 to ${MAX_ROUTE} bytes of printable ASCII`, true);
  }
}

export function deadlineOf(o: CallOptions): number | undefined {
  const t = o.timeout !== undefined ? Date.now() + o.timeout : undefined;
  if (t === undefined) return o.deadline;
  return o.deadline === undefined ? t : Math.min(t, o.deadline);
}

const crashes = [TypeError, ReferenceError, RangeError, SyntaxError, EvalError, URIError];

// The code a handler's failure answers with: an RpcError's own; Internal for the errors a crash
// throws (TypeError and the engine's other built-in errors); Unknown for any other.
export function toRpcError(err: unknown): RpcError {
  if (err instanceof RpcError) return err.code === Code.OK ? new RpcError(Code.Unknown, err.detail, err.unprocessed) : err;
  const msg = err instanceof Error ? err.message : String(err);
  if (err instanceof Error && crashes.some((c) => err.constructor === c)) return new RpcError(Code.Internal, `handler crashed: ${err.name}: ${msg}`);
  return new RpcError(Code.Unknown, msg);
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
