// @rpcd/client: a client of rpcd's wire protocol (docs/protocol.md) for browsers and Node.
// This entry uses nothing but the web platform (WebSocket, CompressionStream, AbortSignal);
// '@rpcd/client/node' adds TCP, TLS and a WebSocket of its own for Node.

import { type Client, connectTransport, openWithin } from './client.js';
import type { ClientOptions } from './types.js';
import { type Transport, type WebSocketOptions, webSocketTransport } from './transport.js';

export { Client, connectTransport } from './client.js';
export type {
  CallOptions,
  ClientOptions,
  GoAway,
  Handler,
  IncomingCall,
  RawCallOptions,
  RawHandler,
  Reply,
  StreamHandler,
  StreamOptions,
} from './types.js';
export { Code, codeName, isCode, RpcError, type CodeNumber } from './errors.js';
export { Metadata, type MetadataInit, type PayloadInit } from './metadata.js';
export { Message, Subscription, type SubscribeOptions } from './pubsub.js';
export { Stream } from './stream.js';
export {
  SUBPROTOCOL,
  webSocketTransport,
  type Transport,
  type TransportEvents,
  type WebSocketConstructor,
  type WebSocketLike,
  type WebSocketOptions,
} from './transport.js';
export { Codec, Flag, Kind } from './wire.js';

/** Options of {@link connect}: the client's, and the WebSocket's. */
export interface ConnectOptions extends ClientOptions, WebSocketOptions {}

/**
 * connect opens a connection to an rpcd server and resolves once it is ready (after the Welcome,
 * when a Hello is sent). target is a `ws://host:port/ws` or `wss://` URL (rpcd serve's gateway),
 * opened with the platform's WebSocket, or a transport already open.
 */
export async function connect(target: string | Transport, options: ConnectOptions = {}): Promise<Client> {
  const t = typeof target === 'string' ? await openWithin(options.handshakeTimeout ?? 10_000, options.signal, (signal) => webSocketTransport(target, { ...options, signal })) : target;
  return connectTransport(t, options);
}
