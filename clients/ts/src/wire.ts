// The frame, byte by byte (docs/protocol.md, "Frame layout" to "Rules per kind"): constants,
// encoding, an incremental reader and the checks a receiver makes. No I/O.

/** Frame kinds ("Kinds"). */
export const Kind = {
  Request: 0x01,
  Response: 0x02,
  Error: 0x03,
  OneWay: 0x04,
  Cancel: 0x05,
  Ping: 0x06,
  Pong: 0x07,
  GoAway: 0x08,
  Subscribe: 0x09,
  Unsubscribe: 0x0a,
  Publish: 0x0b,
  Message: 0x0c,
  Hello: 0x10,
  Welcome: 0x11,
  StreamOpen: 0x18,
  StreamData: 0x19,
  StreamCredit: 0x1a,
  StreamEnd: 0x1b,
  StreamReset: 0x1c,
} as const;

/** Flag bits ("Flags"). */
export const Flag = {
  Unprocessed: 0x01,
  /** The two compression bits: 0 none, 0x02 gzip, 0x04 Zstandard, 0x06 reserved. */
  CompressionMask: 0x06,
  Gzip: 0x02,
  Zstd: 0x04,
} as const;

/** Codec ids ("Codecs"): 0x80 to 0xFF are the application's own. */
export const Codec = {
  Raw: 0x00,
  JSON: 0x01,
} as const;

/** The header's size in bytes. */
export const HEADER_SIZE = 24;
/** rpcd's default limit on a whole frame, header included ("Limits"). */
export const DEFAULT_MAX_FRAME = 4 * 1024 * 1024;
/** The route length rpcd accepts ("Limits"). */
export const MAX_ROUTE = 256;
/** The metadata length rpcd accepts ("Limits"). */
export const MAX_METADATA = 8192;
/** The largest Hello or Welcome payload. */
export const MAX_HELLO = 4096;
/** The largest Ping or Pong payload. */
export const MAX_PING = 64;
/** The largest stream window or credit: 2^31-1. */
export const MAX_WINDOW = 0x7fffffff;

const MAGIC0 = 0x52;
const MAGIC1 = 0x44;
const VERSION = 1;

/** A metadata entry as it travels: a key and the value's bytes. */
export type MetaEntry = [key: string, value: Uint8Array];

/** A decoded frame. */
export interface Frame {
  kind: number;
  flags: number;
  codec: number;
  id: number;
  deadline: number;
  route: string;
  metadata: MetaEntry[];
  payload: Uint8Array;
}

/** What an outgoing frame holds; fields left out are 0 or empty. */
export interface FrameInit {
  kind: number;
  flags?: number;
  codec?: number;
  id?: number;
  deadline?: number;
  route?: string;
  metadata?: readonly MetaEntry[];
  payload?: Uint8Array;
}

const utf8 = new TextEncoder();
const utf8d = new TextDecoder();

/** Encodes s as UTF-8. */
export function encodeUTF8(s: string): Uint8Array {
  return utf8.encode(s);
}

/** Decodes UTF-8 (bytes that are not UTF-8 become U+FFFD). */
export function decodeUTF8(b: Uint8Array): string {
  return utf8d.decode(b);
}

/** printable reports whether every char of s is printable ASCII, 0x21 to 0x7E. */
export function printable(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/** metadataLength is the bytes md takes in a frame. */
export function metadataLength(md: readonly MetaEntry[]): number {
  let n = 0;
  for (const [k, v] of md) n += 1 + k.length + 2 + v.length;
  return n;
}

/** encodeFrame returns the bytes of one frame. It checks nothing: the caller has. */
export function encodeFrame(f: FrameInit): Uint8Array {
  const route = f.route ?? '';
  const md = f.metadata ?? [];
  const payload = f.payload ?? new Uint8Array(0);
  const mdLen = metadataLength(md);
  const out = new Uint8Array(HEADER_SIZE + route.length + mdLen + payload.length);
  const dv = new DataView(out.buffer);
  out[0] = MAGIC0;
  out[1] = MAGIC1;
  out[2] = VERSION;
  out[3] = f.kind;
  out[4] = f.flags ?? 0;
  out[5] = f.codec ?? 0;
  dv.setUint16(6, route.length);
  dv.setUint32(8, (f.id ?? 0) >>> 0);
  dv.setUint32(12, (f.deadline ?? 0) >>> 0);
  dv.setUint16(16, mdLen);
  dv.setUint16(18, 0);
  dv.setUint32(20, payload.length);
  let o = HEADER_SIZE;
  for (let i = 0; i < route.length; i++) out[o++] = route.charCodeAt(i);
  for (const [k, v] of md) {
    out[o++] = k.length;
    for (let i = 0; i < k.length; i++) out[o++] = k.charCodeAt(i);
    dv.setUint16(o, v.length);
    o += 2;
    out.set(v, o);
    o += v.length;
  }
  out.set(payload, o);
  return out;
}

/** An error body (Error, StreamReset, the server's Unsubscribe): a 2-byte code, then the message. */
export function errorBody(code: number, message: string): Uint8Array {
  const m = encodeUTF8(message);
  const out = new Uint8Array(2 + m.length);
  out[0] = code >> 8;
  out[1] = code & 0xff;
  out.set(m, 2);
  return out;
}

/** A GoAway body: the last call id taken in, then an error body. */
export function goAwayBody(last: number, code: number, message: string): Uint8Array {
  const e = errorBody(code, message);
  const out = new Uint8Array(4 + e.length);
  new DataView(out.buffer).setUint32(0, last >>> 0);
  out.set(e, 4);
  return out;
}

/** A 4-byte big-endian window or credit. */
export function u32Body(n: number): Uint8Array {
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n >>> 0);
  return out;
}

/** readU32 reads a big-endian uint32 at off. */
export function readU32(b: Uint8Array, off = 0): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(off);
}

/** Parses an error body: its code and message. The caller checked it has 2 bytes or more. */
export function parseErrorBody(b: Uint8Array): { code: number; message: string } {
  return { code: (b[0]! << 8) | b[1]!, message: decodeUTF8(b.subarray(2)) };
}

/** ProtocolError is a frame that breaks a rule of the page; its message names the rule. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** Parses a metadata section; a malformed one is a ProtocolError. */
export function parseMetadata(b: Uint8Array): MetaEntry[] {
  const out: MetaEntry[] = [];
  let i = 0;
  while (i < b.length) {
    const kl = b[i]!;
    if (kl === 0) throw new ProtocolError('metadata entry with a zero key length');
    if (i + 1 + kl + 2 > b.length) throw new ProtocolError('metadata entry runs past the section');
    let key = '';
    for (let j = i + 1; j < i + 1 + kl; j++) {
      const c = b[j]!;
      if (c < 0x21 || c > 0x7e) throw new ProtocolError('metadata key byte outside 0x21-0x7E');
      key += String.fromCharCode(c);
    }
    i += 1 + kl;
    const vl = (b[i]! << 8) | b[i + 1]!;
    i += 2;
    if (i + vl > b.length) throw new ProtocolError('metadata entry runs past the section');
    out.push([key, b.subarray(i, i + vl)]);
    i += vl;
  }
  return out;
}

/** The first value of key in md, as bytes. */
export function metaBytes(md: readonly MetaEntry[], key: string): Uint8Array | undefined {
  for (const [k, v] of md) if (k === key) return v;
  return undefined;
}

/** The limits a reader enforces on the frames it reads. */
export interface ReadLimits {
  maxFrame: number;
  maxRoute: number;
  maxMetadata: number;
}

interface Header {
  kind: number;
  flags: number;
  codec: number;
  routeLen: number;
  id: number;
  deadline: number;
  mdLen: number;
  payloadLen: number;
}

/**
 * FrameReader turns bytes, in any chunks, into whole frames. It checks each header as soon as its
 * 24 bytes have arrived, before it buffers the rest ("Limits"), and throws ProtocolError for a
 * frame it must not read on.
 */
export class FrameReader {
  private chunks: Uint8Array[] = [];
  private buffered = 0;
  private hdr: Header | null = null;

  constructor(private readonly limits: ReadLimits) {}

  /** Takes chunk and returns the frames it completes. */
  push(chunk: Uint8Array): Frame[] {
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
    }
    const out: Frame[] = [];
    for (;;) {
      if (this.hdr === null) {
        if (this.buffered < HEADER_SIZE) break;
        this.hdr = checkHeader(this.take(HEADER_SIZE), this.limits);
      }
      const h = this.hdr;
      const body = h.routeLen + h.mdLen + h.payloadLen;
      if (this.buffered < body) break;
      const all = body > 0 ? this.take(body) : new Uint8Array(0);
      this.hdr = null;
      let route = '';
      for (let i = 0; i < h.routeLen; i++) route += String.fromCharCode(all[i]!);
      if (!printable(route)) throw new ProtocolError('route byte outside 0x21-0x7E');
      const metadata = parseMetadata(all.subarray(h.routeLen, h.routeLen + h.mdLen));
      out.push({
        kind: h.kind,
        flags: h.flags,
        codec: h.codec,
        id: h.id,
        deadline: h.deadline,
        route,
        metadata,
        payload: all.subarray(h.routeLen + h.mdLen),
      });
    }
    return out;
  }

  private take(n: number): Uint8Array {
    const first = this.chunks[0]!;
    if (first.length >= n) {
      const out = first.subarray(0, n);
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      this.buffered -= n;
      return out;
    }
    const out = new Uint8Array(n);
    let off = 0;
    while (off < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.length, n - off);
      out.set(c.subarray(0, k), off);
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
      off += k;
    }
    this.buffered -= n;
    return out;
  }
}

// Per kind ("Rules per kind"): the call id (0, 1 or more, or either), whether the codec must be
// Raw, the route (required or none), whether the deadline must be 0, the flags allowed, and the
// payload's bounds.
interface Rule {
  id: 'zero' | 'pos' | 'any';
  raw: boolean;
  route: boolean;
  dl0: boolean;
  flags: 'compression' | number[];
  min?: number;
  max?: number;
  len?: number;
}

const rules: Record<number, Rule> = {
  [Kind.Request]: { id: 'pos', raw: false, route: true, dl0: false, flags: 'compression' },
  [Kind.Response]: { id: 'pos', raw: false, route: false, dl0: true, flags: 'compression' },
  [Kind.Error]: { id: 'any', raw: true, route: false, dl0: true, flags: [0, Flag.Unprocessed], min: 2 },
  [Kind.OneWay]: { id: 'pos', raw: false, route: true, dl0: false, flags: 'compression' },
  [Kind.Cancel]: { id: 'pos', raw: true, route: false, dl0: true, flags: [0], max: 0 },
  [Kind.Ping]: { id: 'zero', raw: true, route: false, dl0: true, flags: [0], max: MAX_PING },
  [Kind.Pong]: { id: 'zero', raw: true, route: false, dl0: true, flags: [0], max: MAX_PING },
  [Kind.GoAway]: { id: 'zero', raw: true, route: false, dl0: true, flags: [0], min: 6 },
  [Kind.Hello]: { id: 'zero', raw: true, route: false, dl0: true, flags: [0], max: MAX_HELLO },
  [Kind.Welcome]: { id: 'zero', raw: true, route: false, dl0: true, flags: [0], max: MAX_HELLO },
  [Kind.Subscribe]: { id: 'pos', raw: true, route: true, dl0: true, flags: [0], max: 0 },
  [Kind.Unsubscribe]: { id: 'pos', raw: true, route: false, dl0: true, flags: [0] },
  [Kind.Publish]: { id: 'zero', raw: false, route: true, dl0: true, flags: [0] },
  [Kind.Message]: { id: 'pos', raw: false, route: true, dl0: true, flags: 'compression' },
  [Kind.StreamOpen]: { id: 'pos', raw: false, route: true, dl0: false, flags: [0], len: 4 },
  [Kind.StreamData]: { id: 'pos', raw: true, route: false, dl0: true, flags: 'compression' },
  [Kind.StreamCredit]: { id: 'pos', raw: true, route: false, dl0: true, flags: [0], len: 4 },
  [Kind.StreamEnd]: { id: 'pos', raw: true, route: false, dl0: true, flags: [0], max: 0 },
  [Kind.StreamReset]: { id: 'pos', raw: true, route: false, dl0: true, flags: [0, Flag.Unprocessed], min: 2 },
};

/** kindName is the name of a kind, for messages. */
export function kindName(kind: number): string {
  for (const [k, v] of Object.entries(Kind)) if (v === kind) return k;
  return `kind 0x${kind.toString(16)}`;
}

function checkHeader(b: Uint8Array, limits: ReadLimits): Header {
  const dv = new DataView(b.buffer, b.byteOffset, HEADER_SIZE);
  if (b[0] !== MAGIC0 || b[1] !== MAGIC1) throw new ProtocolError('bad magic');
  if (b[2] !== VERSION) throw new ProtocolError(`unknown version ${b[2]}`);
  const h: Header = {
    kind: b[3]!,
    flags: b[4]!,
    codec: b[5]!,
    routeLen: dv.getUint16(6),
    id: dv.getUint32(8),
    deadline: dv.getUint32(12),
    mdLen: dv.getUint16(16),
    payloadLen: dv.getUint32(20),
  };
  if (dv.getUint16(18) !== 0) throw new ProtocolError('reserved header field not 0');
  const rule = rules[h.kind];
  if (rule === undefined) throw new ProtocolError(`reserved kind 0x${h.kind.toString(16)}`);
  const name = kindName(h.kind);
  if (HEADER_SIZE + h.routeLen + h.mdLen + h.payloadLen > limits.maxFrame) throw new ProtocolError(`${name} larger than the frame limit ${limits.maxFrame}`);
  if (h.routeLen > limits.maxRoute) throw new ProtocolError(`${name} route longer than ${limits.maxRoute}`);
  if (h.mdLen > limits.maxMetadata) throw new ProtocolError(`${name} metadata longer than ${limits.maxMetadata}`);
  if (h.flags & 0xf8) throw new ProtocolError(`${name} with a reserved flag bit set`);
  if (rule.flags === 'compression') {
    if (h.flags & Flag.Unprocessed) throw new ProtocolError(`${name} with the Unprocessed flag`);
    if ((h.flags & Flag.CompressionMask) === Flag.CompressionMask) throw new ProtocolError(`${name} with the reserved compression 3`);
    if (h.flags & Flag.CompressionMask && h.payloadLen === 0) throw new ProtocolError(`${name} compressed and empty`);
  } else if (!rule.flags.includes(h.flags)) {
    throw new ProtocolError(h.flags & Flag.CompressionMask ? `compression on a ${name}` : `${name} with flags 0x${h.flags.toString(16)}`);
  }
  if (rule.id === 'zero' && h.id !== 0) throw new ProtocolError(`${name} with a call id other than 0`);
  if (rule.id === 'pos' && h.id === 0) throw new ProtocolError(`${name} with call id 0`);
  if (rule.raw && h.codec !== Codec.Raw) throw new ProtocolError(`${name} with codec ${h.codec}, not Raw`);
  if (rule.route && h.routeLen === 0) throw new ProtocolError(`${name} without a route`);
  if (!rule.route && h.routeLen !== 0) throw new ProtocolError(`${name} with a route`);
  if (rule.dl0 && h.deadline !== 0) throw new ProtocolError(`${name} with a deadline`);
  if (rule.min !== undefined && h.payloadLen < rule.min) throw new ProtocolError(`${name} body shorter than ${rule.min} bytes`);
  if (rule.max !== undefined && h.payloadLen > rule.max) throw new ProtocolError(`${name} payload longer than ${rule.max} bytes`);
  if (rule.len !== undefined && h.payloadLen !== rule.len) throw new ProtocolError(`${name} payload not ${rule.len} bytes`);
  if (h.kind === Kind.Unsubscribe && h.payloadLen === 1) throw new ProtocolError('Unsubscribe with a 1-byte body');
  return h;
}

/**
 * validTopic reports whether s is a topic (wildcards false) or a pattern (wildcards true):
 * tokens of bytes 0x21-0x7E other than `.`, `*` and `>`, separated by `.`; in a pattern a token
 * may be `*`, and the last may be `>` ("Publish and subscribe").
 */
export function validTopic(s: string, wildcards: boolean): boolean {
  if (s.length === 0 || !printable(s)) return false;
  const tokens = s.split('.');
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.length === 0) return false;
    if (wildcards && (t === '*' || (t === '>' && i === tokens.length - 1))) continue;
    if (t.includes('*') || t.includes('>')) return false;
  }
  return true;
}

/** after reports whether call id a comes after b in serial-number order (RFC 1982). */
export function idAfter(a: number, b: number): boolean {
  return ((a - b) | 0) > 0;
}
