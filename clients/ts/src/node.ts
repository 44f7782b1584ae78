// @rpcd/client/node: everything of the browser entry, plus transports for Node: TCP (and TLS,
// and Unix sockets) through node:net, and a WebSocket client of its own over node:net, since
// Node 20 has no WebSocket without a flag.

import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { type Client, connectTransport, openWithin } from './client.js';
import type { ClientOptions } from './types.js';
import { SUBPROTOCOL, type Transport, type TransportEvents, webSocketTransport } from './transport.js';

export * from './index.js';

/** Options of the Node transports. */
export interface NodeTransportOptions {
  /** TLS options for `tls://` and `wss://` (a CA to trust, a client certificate). */
  tls?: tls.ConnectionOptions;
  /** Bytes queued in the socket past which drain waits; 1 MiB when left out. */
  highWaterMark?: number;
  /** Abandons the connecting when aborted. */
  signal?: AbortSignal;
  /**
   * For `ws://` and `wss://`: use this WHATWG WebSocket class (Node 22's global WebSocket, say)
   * instead of this package's own client over node:net.
   */
  WebSocket?: import('./transport.js').WebSocketConstructor;
}

/** Options of {@link connect} on Node. */
export interface NodeConnectOptions extends ClientOptions, NodeTransportOptions {}

/**
 * connect opens a connection to an rpcd server and resolves once it is ready. target is
 * `host:port` or `tcp://host:port` (rpcd's own port), `tls://host:port`, `unix:///path`,
 * `ws://host:port/ws` or `wss://…` (the gateway's WebSocket), or a transport already open.
 */
export async function connect(target: string | Transport, options: NodeConnectOptions = {}): Promise<Client> {
  let t: Transport;
  if (typeof target !== 'string') t = target;
  else {
    t = await openWithin(options.handshakeTimeout ?? 10_000, options.signal, (signal) => {
      const o = { ...options, signal };
      if (!/^wss?:\/\//.test(target)) return tcpTransport(target, o);
      return options.WebSocket ? webSocketTransport(target, { ...o, WebSocket: options.WebSocket }) : nodeWebSocketTransport(target, o);
    });
  }
  return connectTransport(t, options);
}

// A transport over sock: onData turns what sock reads (initial first) into the client's bytes;
// end is how close() ends the connection.
function socketTransport(sock: net.Socket, mark: number, onData: (b: Buffer, events: TransportEvents) => void, end: () => void, initial?: Buffer): Transport {
  let events: TransportEvents | null = null;
  let closed = false;
  let error: Error | undefined;
  const early: Buffer[] = initial?.length ? [initial] : [];
  sock.on('data', (b: Buffer) => (events ? onData(b, events) : early.push(b)));
  sock.on('error', (err) => {
    error ??= err;
  });
  sock.on('close', () => {
    if (closed) return;
    closed = true;
    events?.close(error);
  });
  return {
    start(e) {
      events = e;
      for (const b of early.splice(0)) onData(b, e);
      if (closed) e.close(error);
    },
    write(frame) {
      if (!closed && !sock.destroyed) sock.write(frame);
    },
    drain() {
      if (closed || sock.destroyed || sock.writableLength <= mark) return Promise.resolve();
      return new Promise((resolve) => {
        const done = () => {
          sock.off('drain', done);
          sock.off('close', done);
          resolve();
        };
        sock.on('drain', done);
        sock.on('close', done);
      });
    },
    close() {
      if (closed) return;
      end();
    },
  };
}

// Resolves with sock once it is connected ('connect', or 'secureConnect' for TLS).
function opened<S extends net.Socket>(sock: S, event: string, what: string, signal?: AbortSignal): Promise<S> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      sock.destroy();
      reject(new Error(`rpcd: connecting to ${what} aborted`));
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    sock.once(event, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve(sock);
    });
    sock.once('error', (err) => {
      signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
  });
}

/**
 * tcpTransport connects to rpcd's own port: `host:port`, `tcp://host:port`, `tls://host:port`
 * (with options.tls) or `unix:///path`. Closing it shuts down its write side and keeps reading
 * for up to 2 s, so that a GoAway it sent is not lost to a reset ("Closing").
 */
export async function tcpTransport(address: string, options: NodeTransportOptions = {}): Promise<Transport> {
  let sock: net.Socket;
  let event = 'connect';
  if (address.startsWith('unix://')) {
    sock = net.connect({ path: address.slice('unix://'.length) });
  } else {
    const secure = address.startsWith('tls://');
    const { host, port } = hostPort(address.replace(/^(tcp|tls):\/\//, ''));
    if (secure) {
      sock = tls.connect({ servername: net.isIP(host) ? undefined : host, ...options.tls, host, port });
      event = 'secureConnect';
    } else {
      sock = net.connect({ host, port });
    }
  }
  await opened(sock, event, address, options.signal);
  sock.setNoDelay(true);
  const mark = options.highWaterMark ?? 1 << 20;
  return socketTransport(
    sock,
    mark,
    (b, e) => e.data(new Uint8Array(b.buffer, b.byteOffset, b.length)),
    () => {
      sock.end();
      sock.resume(); // reads and discards what still comes, until the peer closes
      setTimeout(() => sock.destroy(), 2000).unref();
    },
  );
}

function hostPort(s: string): { host: string; port: number } {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(s);
  if (!m) throw new Error(`rpcd: address ${s}: want host:port`);
  return { host: m[1]!, port: Number(m[2]) };
}

const WS_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/**
 * nodeWebSocketTransport opens a WebSocket (RFC 6455) to url (`ws://host:port/ws` or `wss://`)
 * over node:net or node:tls, asking for the `rpcd` subprotocol: a minimal client, for Node 20
 * and later, that sends each frame in one masked binary message, answers pings, and takes the
 * server's binary messages, fragmented or not. It offers no extensions (no permessage-deflate).
 */
export async function nodeWebSocketTransport(url: string, options: NodeTransportOptions = {}): Promise<Transport> {
  const u = new URL(url);
  if (u.protocol !== 'ws:' && u.protocol !== 'wss:') throw new Error(`rpcd: ${url}: not a ws:// or wss:// URL`);
  const secure = u.protocol === 'wss:';
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const port = Number(u.port || (secure ? 443 : 80));
  const sock: net.Socket = secure ? tls.connect({ servername: net.isIP(host) ? undefined : host, ...options.tls, host, port }) : net.connect({ host, port });
  await opened(sock, secure ? 'secureConnect' : 'connect', url, options.signal);
  sock.setNoDelay(true);

  const key = randomBytes(16).toString('base64');
  sock.write(
    `GET ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: ${SUBPROTOCOL}\r\n\r\n`,
  );
  const rest = await new Promise<Buffer>((resolve, reject) => {
    let head = Buffer.alloc(0);
    const fail = (err: Error) => {
      cleanup();
      sock.destroy();
      reject(err);
    };
    const onData = (b: Buffer) => {
      head = Buffer.concat([head, b]);
      const i = head.indexOf('\r\n\r\n');
      if (i < 0) {
        if (head.length > 16384) fail(new Error(`rpcd: WebSocket to ${url}: response header too long`));
        return;
      }
      const lines = head.subarray(0, i).toString('latin1').split('\r\n');
      const status = lines[0] ?? '';
      const headers = new Map<string, string>();
      for (const l of lines.slice(1)) {
        const c = l.indexOf(':');
        if (c > 0) headers.set(l.slice(0, c).trim().toLowerCase(), l.slice(c + 1).trim());
      }
      if (!/^HTTP\/1\.1 101 /.test(status)) return fail(new Error(`rpcd: WebSocket to ${url}: ${status}`));
      const accept = createHash('sha1').update(key + WS_GUID).digest('base64');
      if (headers.get('sec-websocket-accept') !== accept) return fail(new Error(`rpcd: WebSocket to ${url}: wrong Sec-WebSocket-Accept`));
      if (headers.get('sec-websocket-protocol') !== SUBPROTOCOL) return fail(new Error(`rpcd: ${url} did not take the rpcd subprotocol`));
      if (headers.has('sec-websocket-extensions')) return fail(new Error(`rpcd: WebSocket to ${url}: an extension nobody asked for`));
      cleanup();
      resolve(head.subarray(i + 4));
    };
    const onClose = () => fail(new Error(`rpcd: WebSocket to ${url}: closed during the handshake`));
    const onError = (err: Error) => fail(err);
    const onAbort = () => fail(new Error(`rpcd: WebSocket to ${url}: opening aborted`));
    const cleanup = () => {
      sock.off('data', onData);
      sock.off('close', onClose);
      sock.off('error', onError);
      options.signal?.removeEventListener('abort', onAbort);
    };
    sock.on('data', onData);
    sock.on('close', onClose);
    sock.on('error', onError);
    if (options.signal?.aborted) return onAbort();
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });

  // Sends one WebSocket frame: FIN set, masked, as a client must.
  const sendWS = (opcode: number, payload: Uint8Array) => {
    const n = payload.length;
    const len = n < 126 ? 2 : n < 65536 ? 4 : 10;
    const out = Buffer.allocUnsafe(len + 4 + n);
    out[0] = 0x80 | opcode;
    if (n < 126) out[1] = 0x80 | n;
    else if (n < 65536) {
      out[1] = 0x80 | 126;
      out.writeUInt16BE(n, 2);
    } else {
      out[1] = 0x80 | 127;
      out.writeBigUInt64BE(BigInt(n), 2);
    }
    const mask = randomBytes(4);
    mask.copy(out, len);
    for (let i = 0; i < n; i++) out[len + 4 + i] = payload[i]! ^ mask[i & 3]!;
    sock.write(out);
  };

  let buf: Buffer = Buffer.alloc(0);
  let messageOp = 0; // the opcode of the message whose fragments are coming
  let closeSent = false;
  const closeWS = (code: number, reason = '') => {
    if (closeSent || sock.destroyed) return;
    closeSent = true;
    const r = Buffer.from(reason);
    const body = Buffer.alloc(2 + r.length);
    body.writeUInt16BE(code);
    r.copy(body, 2);
    sendWS(0x8, body);
    sock.end();
    setTimeout(() => sock.destroy(), 2000).unref();
  };
  const fail = (err: Error, code: number, events: TransportEvents) => {
    closeWS(code);
    sock.destroy(err);
    events.close(err);
  };
  const onData = (b: Buffer, events: TransportEvents) => {
    buf = buf.length ? Buffer.concat([buf, b]) : b;
    for (;;) {
      if (buf.length < 2) return;
      const fin = (buf[0]! & 0x80) !== 0;
      const op = buf[0]! & 0x0f;
      if (buf[0]! & 0x70) return fail(new Error('rpcd: WebSocket frame with a reserved bit set'), 1002, events);
      if (buf[1]! & 0x80) return fail(new Error('rpcd: masked WebSocket frame from the server'), 1002, events);
      let n = buf[1]! & 0x7f;
      let off = 2;
      if (n === 126) {
        if (buf.length < 4) return;
        n = buf.readUInt16BE(2);
        off = 4;
      } else if (n === 127) {
        if (buf.length < 10) return;
        const big = buf.readBigUInt64BE(2);
        if (big > 0x7fffffffn) return fail(new Error('rpcd: WebSocket frame too large'), 1009, events);
        n = Number(big);
        off = 10;
      }
      if (buf.length < off + n) return;
      const payload = buf.subarray(off, off + n);
      buf = buf.subarray(off + n);
      switch (op) {
        case 0x0: // continuation
        case 0x1: // text
        case 0x2: {
          // binary
          if (op !== 0) messageOp = op;
          if (messageOp === 0x1) return fail(new Error('rpcd: a text message on the WebSocket'), 1003, events);
          if (payload.length) events.data(new Uint8Array(payload.buffer, payload.byteOffset, payload.length));
          if (fin) messageOp = 0;
          break;
        }
        case 0x8: // close: answer it; the socket's close follows
          closeWS(payload.length >= 2 ? payload.readUInt16BE(0) : 1000);
          break;
        case 0x9: // ping
          sendWS(0xa, payload);
          break;
        case 0xa: // pong
          break;
        default:
          return fail(new Error(`rpcd: WebSocket opcode ${op}`), 1002, events);
      }
    }
  };
  const t = socketTransport(sock, options.highWaterMark ?? 1 << 20, onData, () => closeWS(1000), rest);
  // Each rpcd frame in a binary message of its own.
  t.write = (frame) => {
    if (!closeSent && !sock.destroyed) sendWS(0x2, frame);
  };
  return t;
}
