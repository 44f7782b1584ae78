// Subscriptions and the Messages they get (docs/protocol.md, "Publish and subscribe").

import { RpcError } from './errors.js';
import { Codec, decodeUTF8 } from './wire.js';

/** A Message delivered to a subscription. */
export class Message {
  /** The topic it was published to. */
  readonly topic: string;
  /** The codec it was published with. */
  readonly codec: number;
  /** Its payload, expanded if it came compressed. */
  readonly payload: Uint8Array;

  constructor(topic: string, codec: number, payload: Uint8Array) {
    this.topic = topic;
    this.codec = codec;
    this.payload = payload;
  }

  /** The payload decoded as UTF-8. */
  text(): string {
    return decodeUTF8(this.payload);
  }

  /** The payload parsed as JSON; an empty payload is undefined. */
  json<T = unknown>(): T {
    return (this.payload.length === 0 ? undefined : JSON.parse(this.text())) as T;
  }

  /** Whether the publisher labelled it JSON. */
  get isJSON(): boolean {
    return this.codec === Codec.JSON;
  }
}

/** Options of {@link Client.subscribe}. */
export interface SubscribeOptions {
  /** Takes each Message as it comes; the subscription is then not iterated. */
  onMessage?: (m: Message) => void;
  /** Messages kept for the iterator while it is not reading; past it they are dropped (counted in `dropped`). 4096 when left out. */
  maxQueued?: number;
}

/**
 * Subscription is a live subscription to a pattern. Iterate it (`for await`) or give
 * `onMessage`; {@link unsubscribe} ends it. When the server ends it (a limit, permissions) or the
 * connection is lost, the iterator throws that RpcError, and {@link closed} resolves to it.
 */
export class Subscription implements AsyncIterable<Message> {
  /** The subscription id this client gave it. */
  readonly id: number;
  /** The pattern subscribed to. */
  readonly pattern: string;
  /** Resolves when the subscription ends: to undefined after unsubscribe(), else to the reason. */
  readonly closed: Promise<RpcError | undefined>;
  /** Messages dropped: past maxQueued, or compressed and not expandable. */
  dropped = 0;
  /** @internal The server took it in: an end from the server after this is no refusal. */
  taken = false;

  private readonly onMessage: ((m: Message) => void) | undefined;
  private readonly maxQueued: number;
  private queue: Message[] = [];
  private waiters: (() => void)[] = [];
  private ended = false;
  private err: RpcError | undefined;
  private resolveClosed!: (e: RpcError | undefined) => void;
  private readonly sendUnsubscribe: (s: Subscription) => void;

  /** @internal */
  constructor(id: number, pattern: string, opts: SubscribeOptions, sendUnsubscribe: (s: Subscription) => void) {
    this.id = id;
    this.pattern = pattern;
    this.onMessage = opts.onMessage;
    this.maxQueued = opts.maxQueued ?? 4096;
    this.sendUnsubscribe = sendUnsubscribe;
    this.closed = new Promise((r) => {
      this.resolveClosed = r;
    });
  }

  /** Ends the subscription: the server stops delivering; Messages already on their way are dropped. */
  unsubscribe(): void {
    if (this.ended) return;
    this.sendUnsubscribe(this);
    this.end(undefined);
  }

  /** Whether the subscription has ended. */
  get isClosed(): boolean {
    return this.ended;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Message> {
    for (;;) {
      const m = this.queue.shift();
      if (m !== undefined) {
        yield m;
        continue;
      }
      if (this.ended) {
        if (this.err) throw this.err;
        return;
      }
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  /** @internal Delivers a Message. */
  deliver(m: Message): void {
    if (this.ended) return;
    if (this.onMessage) {
      try {
        this.onMessage(m);
      } catch (err) {
        // The callback's own failure: reported as an uncaught error would be, not swallowed.
        queueMicrotask(() => {
          throw err;
        });
      }
      return;
    }
    if (this.queue.length >= this.maxQueued) {
      this.dropped++;
      return;
    }
    this.queue.push(m);
    this.wake();
  }

  /** @internal Ends the subscription with err (undefined: unsubscribed). */
  end(err: RpcError | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.err = err;
    this.resolveClosed(err);
    this.wake();
  }

  private wake(): void {
    for (const r of this.waiters.splice(0)) r();
  }
}
