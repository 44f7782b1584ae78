// The client's options, and the shapes of what it takes and gives.

import type { Client } from './client.js';
import type { RpcError } from './errors.js';
import type { Metadata, MetadataInit, PayloadInit } from './metadata.js';
import type { Stream } from './stream.js';

/** Options of {@link connect}. The zero value works: no Hello, no compression, rpcd's limits. */
export interface ClientOptions {
  /** Credentials for the Hello (a token); a Hello is sent when this, `authMethod`, `compression` or `hello` is set. */
  token?: PayloadInit;
  /** The authentication method the Hello names (`rpcd-auth-method`: `token`, `hmac`). */
  authMethod?: string;
  /** Send a Hello even without credentials or compression (its Welcome then tells the identity). */
  hello?: boolean;
  /**
   * `'gzip'`: name gzip in the Hello and in each Subscribe, expand what comes compressed, and
   * compress calls of `compressMin` bytes or more once the Welcome names gzip. Needs the
   * platform's CompressionStream. Zstandard is not offered.
   */
  compression?: 'gzip';
  /** The smallest call payload compressed, in bytes; 1024 when left out. */
  compressMin?: number;
  /** The largest frame read or sent, header included; 4 MiB (rpcd's default) when left out. */
  maxFrameSize?: number;
  /** The receive window of each stream, in bytes; 256 KiB when left out. */
  streamWindow?: number;
  /** How long {@link connect} waits to open the connection (TCP, TLS, the WebSocket's upgrade), and then for the Welcome, in ms each; 10,000 when left out. */
  handshakeTimeout?: number;
  /** Runs once the Hello (if any) is queued and before any frame is read: registers handlers the server may call at once. */
  setup?: (client: Client) => void;
  /** Takes each refusal of a Publish (an Error of call id 0: topic permissions). */
  onPublishRefused?: (err: RpcError) => void;
  /** Told of a GoAway from the server (a drain, a protocol error of this client's, a refusal). */
  onGoAway?: (g: GoAway) => void;
}

/** Options of a call. */
export interface CallOptions {
  /** Aborting it fails the call with Canceled and sends Cancel. */
  signal?: AbortSignal;
  /** The most milliseconds to wait; sent as the frame's deadline, and enforced here too. */
  timeout?: number;
  /** An absolute deadline (`Date.now()` milliseconds); the earlier of it and `timeout` counts. */
  deadline?: number;
  /** Metadata to send with the call. */
  metadata?: MetadataInit;
}

/** Options of a raw call: the codec byte to label the payload with (Raw when left out). */
export interface RawCallOptions extends CallOptions {
  codec?: number;
}

/** Options of {@link Client.openStream}. */
export interface StreamOptions extends RawCallOptions {
  /** The window granted to the server's end, in bytes; the client's streamWindow when left out. */
  window?: number;
}

/** A raw reply: its payload and the codec it is labelled with. */
export interface Reply {
  payload: Uint8Array;
  codec: number;
}

/** A GoAway: the last call id of this client's the peer took in, its code and message. */
export interface GoAway {
  last: number;
  code: number;
  message: string;
}

/** A call the server makes to this client (a Request, or a OneWay push). */
export interface IncomingCall {
  /** The server's call id. */
  id: number;
  route: string;
  codec: number;
  metadata: Metadata;
  /** Aborted when the server cancels the call, its deadline passes, or the connection ends. */
  signal: AbortSignal;
  /** The call's deadline (`Date.now()` milliseconds), if it has one. */
  deadline?: number;
  /** True for a OneWay: whatever the handler returns is not sent. */
  oneWay: boolean;
}

/** A handler of JSON calls from the server: it takes the decoded argument and returns the reply value. */
export type Handler<A = any, R = unknown> = (args: A, call: IncomingCall) => R | Promise<R>;
/** A handler of raw calls from the server: the reply goes back in the Request's codec. */
export type RawHandler = (payload: Uint8Array, call: IncomingCall) => PayloadInit | void | Promise<PayloadInit | void>;
/** A handler of streams the server opens; the stream finishes when it returns (well) or throws. */
export type StreamHandler = (stream: Stream, call: IncomingCall) => void | Promise<void>;
