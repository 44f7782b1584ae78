// Metadata as the API shows it, and the payload conversions shared by calls, pushes and messages.

import { Code, RpcError } from './errors.js';
import { decodeUTF8, encodeUTF8, type MetaEntry, printable } from './wire.js';

/** Metadata to send: an object of keys to values, or key/value pairs (a key may repeat). */
export type MetadataInit = Record<string, string | Uint8Array> | Iterable<readonly [string, string | Uint8Array]>;

/** Metadata received with a call: key/value pairs in the order they came. */
export class Metadata {
  /** The entries, in order; values as bytes. */
  readonly entries: readonly MetaEntry[];

  constructor(entries: readonly MetaEntry[] = []) {
    this.entries = entries;
  }

  /** The first value of key, decoded as UTF-8; undefined when the key is absent. */
  get(key: string): string | undefined {
    const v = this.getBytes(key);
    return v === undefined ? undefined : decodeUTF8(v);
  }

  /** The first value of key, as bytes. */
  getBytes(key: string): Uint8Array | undefined {
    for (const [k, v] of this.entries) if (k === key) return v;
    return undefined;
  }

  /** Every value of key, decoded as UTF-8. */
  getAll(key: string): string[] {
    return this.entries.filter(([k]) => k === key).map(([, v]) => decodeUTF8(v));
  }
}

/** toEntries checks md's keys and values and returns them as they travel. */
export function toEntries(md: MetadataInit | undefined): MetaEntry[] {
  if (md === undefined) return [];
  const pairs: Iterable<readonly [string, string | Uint8Array]> =
    Symbol.iterator in md ? (md as Iterable<readonly [string, string | Uint8Array]>) : Object.entries(md);
  const out: MetaEntry[] = [];
  for (const [k, v] of pairs) {
    if (k.length < 1 || k.length > 255 || !printable(k)) {
      throw new RpcError(Code.InvalidArgument, `metadata key ${JSON.stringify(k)}: 1 to 255 bytes of printable ASCII`, true);
    }
    const b = typeof v === 'string' ? encodeUTF8(v) : v;
    if (b.length > 0xffff) throw new RpcError(Code.InvalidArgument, `metadata value of ${k}: longer than 65,535 bytes`, true);
    out.push([k, b]);
  }
  return out;
}

/** A payload given as bytes or as a string (sent as UTF-8). */
export type PayloadInit = Uint8Array | string;

/** toBytes is p as bytes. */
export function toBytes(p: PayloadInit | undefined): Uint8Array {
  if (p === undefined) return new Uint8Array(0);
  return typeof p === 'string' ? encodeUTF8(p) : p;
}

/** jsonBytes encodes v as JSON; undefined is the empty payload ("no argument"). */
export function jsonBytes(v: unknown): Uint8Array {
  if (v === undefined) return new Uint8Array(0);
  const s = JSON.stringify(v);
  if (s === undefined) throw new RpcError(Code.InvalidArgument, `cannot encode a ${typeof v} as JSON`, true);
  return encodeUTF8(s);
}

/** parseJSON decodes a JSON payload; the empty payload is undefined. */
export function parseJSON(b: Uint8Array): unknown {
  if (b.length === 0) return undefined;
  return JSON.parse(decodeUTF8(b));
}
