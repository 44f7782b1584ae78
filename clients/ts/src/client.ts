// The client: one connection, its calls both ways, subscriptions and streams
// (docs/protocol.md, "Message flows" and "The connection's life").

import { Code, RpcError } from './errors.js';
import { gunzip, gzip, gzipAvailable } from './gzip.js';
import { jsonBytes, Metadata, parseJSON, type PayloadInit, toBytes, toEntries } from './metadata.js';
import { Message, type SubscribeOptions, Subscription } from './pubsub.js';
import { Stream, type StreamLink } from './stream.js';
import type { Transport } from './transport.js';
import type { CallOptions, ClientOptions, GoAway, Handler, IncomingCall, RawCallOptions, RawHandler, Reply, StreamHandler, StreamOptions } from './types.js';
import { bug, checkRoute, deadlineOf, equalBytes, now, toRpcError } from './util.js';
import {
  Codec,
  DEFAULT_MAX_FRAME,
  decodeUTF8,
  encodeFrame,
  encodeUTF8,
  errorBody,
  Flag,
  type Frame,
  FrameReader,
  goAwayBody,
  HEADER_SIZE,
  idAfter,
  Kind,
  kindName,
  MAX_HELLO,
  MAX_METADATA,
  MAX_PING,
  MAX_ROUTE,
  MAX_WINDOW,
  type MetaEntry,
  metaBytes,
  metadataLength,
  parseErrorBody,
  printable,
  ProtocolError,
  readU32,
  u32Body,
  validTopic,
} from './wire.js';

type ServeFn = (payload: Uint8Array, call: IncomingCall) => Promise<Uint8Array>;

interface Pending {
  id: number;
  route: string;
  sent: boolean;
  resolve(r: Reply): void;
  reject(e: RpcError): void;
  cleanup(): void;
}

interface PendingPing {
  payload: Uint8Array;
  t0: number;
  resolve(ms: number): void;
  reject(e: RpcError): void;
}

type Task = () => void | Promise<void>;
type Make = () => Uint8Array | null | Promise<Uint8Array | null>;

const BARRIER_ROUTE = 'Sys/Ping';
const MAX_ACCEPTED_STREAMS = 256;

/**
 * Client is one connection to an rpcd server; {@link connect} makes one. Calls, pushes and
 * streams go both ways on it; it does not reconnect: once {@link closed} resolves, make another.
 */
export class Client {
  /** The identity the server's Welcome named ('' without authentication; undefined without a Hello). */
  identity: string | undefined;
  /** The compression calls are sent in, settled by the Welcome; undefined for none. */
  compression: 'gzip' | undefined;
  /** The GoAway the server sent, if any: the client starts nothing new after it. */
  goAway: GoAway | undefined;
  /** Publishes the server refused, as far as their refusals have come. */
  refusedPublishes = 0;
  /** Resolves when the connection ends: to undefined after {@link close}, else to the reason. */
  readonly closed: Promise<RpcError | undefined>;

  private readonly transport: Transport;
  private readonly opts: ClientOptions;
  private readonly maxFrame: number;
  private readonly window: number;
  private readonly reader: FrameReader;
  private readonly calls = new Map<number, Pending>();
  private readonly serving = new Map<number, AbortController>();
  private readonly handlers = new Map<string, ServeFn>();
  private readonly streamHandlers = new Map<string, StreamHandler>();
  private readonly subs = new Map<number, Subscription>();
  private readonly streams = new Map<number, Stream>();
  private readonly pings: PendingPing[] = [];
  private lastCallId = 0;
  private lastSubId = 0;
  private lastStreamId = 0;
  private accepted = 0;
  private lastServerCall = 0;
  private welcome: { resolve(): void; reject(e: RpcError): void } | null = null;
  private ended: RpcError | null = null; // set once the connection is done
  private resolveClosed!: (e: RpcError | undefined) => void;
  private outPending = 0;
  private outTail: Promise<void> = Promise.resolve();
  private inPending = 0;
  private inTail: Promise<void> = Promise.resolve();
  private readonly link: StreamLink;

  /** Use {@link connect}: it makes the client, sends the Hello and waits for the Welcome. */
  constructor(transport: Transport, options: ClientOptions = {}) {
    this.transport = transport;
    this.opts = options;
    this.maxFrame = options.maxFrameSize ?? DEFAULT_MAX_FRAME;
    this.window = Math.min(options.streamWindow ?? 256 * 1024, MAX_WINDOW);
    if (this.window < 1) throw new RangeError('rpcd: streamWindow must be 1 or more');
    if (options.compression !== undefined && options.compression !== 'gzip') throw new RangeError(`rpcd: compression ${options.compression}: only gzip is offered`);
    if (options.compression === 'gzip' && !gzipAvailable()) throw new Error('rpcd: compression gzip needs CompressionStream, which this runtime lacks');
    this.reader = new FrameReader({ maxFrame: this.maxFrame, maxRoute: MAX_ROUTE, maxMetadata: MAX_METADATA });
    this.closed = new Promise((r) => {
      this.resolveClosed = r;
    });
    this.link = {
      send: (b) => this.enqueue(() => b),
      drain: () => (this.ended ? Promise.resolve() : this.transport.drain()),
      forget: (s) => {
        if (this.streams.get(s.id) === s) {
          this.streams.delete(s.id);
          if (s.id % 2 === 0) this.accepted--;
        }
      },
      maxChunk: this.maxFrame - HEADER_SIZE,
    };
  }

  /** @internal Starts the connection: the Hello, if any, and waits for its Welcome. */
  async start(): Promise<void> {
    this.transport.start({
      data: (chunk) => this.onData(chunk),
      close: (err) => this.inbound(() => this.lost(err)),
    });
    const o = this.opts;
    if (o.token === undefined && o.authMethod === undefined && o.compression === undefined && !o.hello) {
      o.setup?.(this);
      return;
    }
    const md: MetaEntry[] = [];
    if (o.authMethod !== undefined) md.push(...toEntries([['rpcd-auth-method', o.authMethod]]));
    if (o.compression) md.push(['rpcd-compression', encodeUTF8(o.compression)]);
    const token = toBytes(o.token);
    if (token.length > MAX_HELLO) throw new RpcError(Code.InvalidArgument, 'credentials longer than 4,096 bytes', true);
    const welcomed = new Promise<void>((resolve, reject) => {
      this.welcome = { resolve, reject };
    });
    this.enqueue(() => encodeFrame({ kind: Kind.Hello, metadata: md, payload: token }));
    // After the Hello, which must be the first frame; before the Welcome, after which the server may call.
    o.setup?.(this);
    const ms = o.handshakeTimeout ?? 10_000;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RpcError(Code.DeadlineExceeded, `no Welcome within ${ms} ms`)), ms);
    });
    try {
      await Promise.race([welcomed, timeout]);
    } catch (err) {
      this.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  // ----- Calls -----

  /**
   * Calls route with args encoded as JSON (undefined sends no argument) and resolves to the reply
   * parsed as JSON (an empty reply is undefined). Rejects with an RpcError.
   */
  async call<R = unknown>(route: string, args?: unknown, opts?: CallOptions): Promise<R> {
    const r = await this.request(route, Codec.JSON, jsonBytes(args), opts ?? {});
    try {
      return parseJSON(r.payload) as R;
    } catch (err) {
      throw new RpcError(Code.Internal, `reply of ${route} is not JSON: ${(err as Error).message}`, false, { cause: err });
    }
  }

  /** Calls route with payload as it is, labelled with opts.codec (Raw by default), and resolves to the reply. */
  callRaw(route: string, payload?: PayloadInit, opts?: RawCallOptions): Promise<Reply> {
    return this.request(route, opts?.codec ?? Codec.Raw, toBytes(payload), opts ?? {});
  }

  /** Sends a one-way call (OneWay) with args as JSON: nothing ever answers it. Throws an RpcError if it cannot be sent. */
  notify(route: string, args?: unknown, opts?: CallOptions): void {
    this.oneWay(route, Codec.JSON, jsonBytes(args), opts ?? {});
  }

  /** Sends a one-way call with payload as it is, labelled with opts.codec (Raw by default). */
  notifyRaw(route: string, payload?: PayloadInit, opts?: RawCallOptions): void {
    this.oneWay(route, opts?.codec ?? Codec.Raw, toBytes(payload), opts ?? {});
  }

  /** Sends a Ping with payload (up to 64 bytes) and resolves to the milliseconds until its Pong. */
  ping(payload?: PayloadInit): Promise<number> {
    const p = toBytes(payload);
    if (p.length > MAX_PING) return Promise.reject(new RpcError(Code.InvalidArgument, 'ping payload longer than 64 bytes', true));
    if (this.ended) return Promise.reject(this.refusal());
    return new Promise((resolve, reject) => {
      this.pings.push({ payload: p, t0: now(), resolve, reject });
      this.enqueue(() => encodeFrame({ kind: Kind.Ping, payload: p }));
    });
  }

  private request(route: string, codec: number, payload: Uint8Array, opts: CallOptions): Promise<Reply> {
    return new Promise<Reply>((resolve, reject) => {
      let md: MetaEntry[];
      try {
        md = toEntries(opts.metadata);
        this.check(route, md, payload.length);
      } catch (err) {
        reject(err);
        return;
      }
      const signal = opts.signal;
      if (signal?.aborted) {
        reject(new RpcError(Code.Canceled, `call ${route} canceled before it was sent`, true, { cause: signal.reason }));
        return;
      }
      const at = deadlineOf(opts);
      if (at !== undefined && at <= Date.now()) {
        reject(new RpcError(Code.DeadlineExceeded, `deadline passed before ${route} was sent`, true));
        return;
      }
      const id = this.nextCallId();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const onAbort = () => this.abandon(p, new RpcError(Code.Canceled, `call ${route} canceled`, !p.sent, { cause: signal?.reason }));
      const p: Pending = {
        id,
        route,
        sent: false,
        resolve,
        reject,
        cleanup: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
        },
      };
      this.calls.set(id, p);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (at !== undefined) {
        timer = setTimeout(() => this.abandon(p, new RpcError(Code.DeadlineExceeded, `deadline passed waiting for ${route}`, !p.sent)), at - Date.now());
      }
      this.sendCall(Kind.Request, id, route, codec, md, payload, at, p);
    });
  }

  private oneWay(route: string, codec: number, payload: Uint8Array, opts: CallOptions): void {
    const md = toEntries(opts.metadata);
    this.check(route, md, payload.length);
    if (opts.signal?.aborted) throw new RpcError(Code.Canceled, `one-way call ${route} canceled before it was sent`, true);
    const at = deadlineOf(opts);
    if (at !== undefined && at <= Date.now()) throw new RpcError(Code.DeadlineExceeded, `deadline passed before ${route} was sent`, true);
    this.sendCall(Kind.OneWay, this.nextCallId(), route, codec, md, payload, at, null);
  }

  // Throws the RpcError of a call that cannot go: the connection, the route, the frame's size.
  private check(route: string, md: readonly MetaEntry[], payloadLen: number): void {
    if (this.ended || this.goAway) throw this.refusal();
    checkRoute(route);
    const mdLen = metadataLength(md);
    if (mdLen > MAX_METADATA) throw new RpcError(Code.ResourceExhausted, `metadata of ${mdLen} bytes exceeds the limit ${MAX_METADATA}`, true);
    const size = HEADER_SIZE + route.length + mdLen + payloadLen;
    if (size > this.maxFrame) throw new RpcError(Code.ResourceExhausted, `frame of ${size} bytes for ${route} exceeds the limit ${this.maxFrame}`, true);
  }

  // The error of a call started on a connection that takes none.
  private refusal(): RpcError {
    if (this.ended) return new RpcError(this.ended.code, this.ended.detail, true);
    return new RpcError(Code.Unavailable, `the server is going away: ${this.goAway?.message}`, true);
  }

  private sendCall(kind: number, id: number, route: string, codec: number, md: MetaEntry[], payload: Uint8Array, at: number | undefined, p: Pending | null): void {
    const build = (body: Uint8Array, flags: number) => (): Uint8Array | null => {
      if (p && this.calls.get(id) !== p) return null; // abandoned before it went out
      let deadline = 0;
      if (at !== undefined) {
        const left = at - Date.now();
        if (left <= 0) {
          if (p) this.abandon(p, new RpcError(Code.DeadlineExceeded, `deadline passed before ${route} was sent`, true));
          return null;
        }
        deadline = Math.min(Math.ceil(left), 0xffffffff); // rounded up: 0.3 ms left travels as 1
      }
      if (p) p.sent = true;
      return encodeFrame({ kind, flags, codec, id, deadline, route, metadata: md, payload: body });
    };
    if (this.compression === 'gzip' && payload.length >= (this.opts.compressMin ?? 1024)) {
      this.enqueue(async () => {
        let z: Uint8Array | null = null;
        try {
          z = await gzip(payload);
        } catch {
          z = null; // sent as it is
        }
        return z !== null && z.length < payload.length ? build(z, Flag.Gzip)() : build(payload, 0)();
      });
    } else {
      this.enqueue(build(payload, 0));
    }
  }

  private nextCallId(): number {
    do this.lastCallId = this.lastCallId >= 0xffffffff ? 1 : this.lastCallId + 1;
    while (this.calls.has(this.lastCallId));
    return this.lastCallId;
  }

  // Stops waiting for p with err; sends Cancel if its Request went out.
  private abandon(p: Pending, err: RpcError): void {
    if (this.calls.get(p.id) !== p) return;
    this.calls.delete(p.id);
    p.cleanup();
    p.reject(err);
    if (p.sent && !this.ended) this.enqueue(() => encodeFrame({ kind: Kind.Cancel, id: p.id }));
  }

  // Takes p out of the calls waiting, if it still is (it may have been abandoned meanwhile).
  private settle(p: Pending | undefined): Pending | undefined {
    if (p === undefined || this.calls.get(p.id) !== p) return undefined;
    this.calls.delete(p.id);
    p.cleanup();
    return p;
  }

  // ----- Serving the server's calls -----

  /** Serves route for the server's JSON calls (Requests and OneWay pushes); replaces any handler of route. */
  handle<A = any, R = unknown>(route: string, fn: Handler<A, R>): void {
    checkRoute(route);
    this.handlers.set(route, async (payload, call) => {
      if (call.codec !== Codec.JSON) throw new RpcError(Code.InvalidArgument, `${route} takes JSON, not codec ${call.codec}`, true);
      let args: A;
      try {
        args = parseJSON(payload) as A;
      } catch (err) {
        throw new RpcError(Code.InvalidArgument, `argument of ${route} is not JSON: ${(err as Error).message}`, true);
      }
      return jsonBytes(await fn(args, call));
    });
  }

  /** Serves route for the server's calls with their payload as bytes; the reply goes in the Request's codec. */
  handleRaw(route: string, fn: RawHandler): void {
    checkRoute(route);
    this.handlers.set(route, async (payload, call) => toBytes((await fn(payload, call)) ?? undefined));
  }

  /** Serves the streams the server opens to route. */
  handleStream(route: string, fn: StreamHandler): void {
    checkRoute(route);
    this.streamHandlers.set(route, fn);
  }

  /** Removes route's call and stream handlers: the server's calls to it then get NotFound. */
  removeHandler(route: string): void {
    this.handlers.delete(route);
    this.streamHandlers.delete(route);
  }

  private serve(f: Frame, payload: Uint8Array): void {
    const oneWay = f.kind === Kind.OneWay;
    if (idAfter(f.id, this.lastServerCall) || this.lastServerCall === 0) this.lastServerCall = f.id;
    if (!oneWay && this.serving.has(f.id)) {
      this.answerError(f.id, Code.InvalidArgument, `call id ${f.id} is already in flight`, true);
      return;
    }
    const fn = this.handlers.get(f.route);
    if (fn === undefined) {
      if (!oneWay) this.answerError(f.id, Code.NotFound, `no route ${f.route}`, true);
      return; // a OneWay is never answered
    }
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (f.deadline > 0) {
      timer = setTimeout(() => ctrl.abort(new RpcError(Code.DeadlineExceeded, `deadline of ${f.route} passed`)), f.deadline);
    }
    if (!oneWay) this.serving.set(f.id, ctrl);
    const call: IncomingCall = {
      id: f.id,
      route: f.route,
      codec: f.codec,
      metadata: new Metadata(f.metadata),
      signal: ctrl.signal,
      oneWay,
      ...(f.deadline > 0 ? { deadline: Date.now() + f.deadline } : {}),
    };
    Promise.resolve()
      .then(() => {
        // Cancelled before its handler started: answered without running it.
        const r = ctrl.signal.reason;
        if (ctrl.signal.aborted) throw r instanceof RpcError ? new RpcError(r.code, r.detail, true) : r;
        return fn(payload, call);
      })
      .then(
        (reply) => {
          if (oneWay || this.ended) return;
          const size = HEADER_SIZE + reply.length;
          if (size > this.maxFrame) {
            this.answerError(f.id, Code.ResourceExhausted, `reply of ${size} bytes exceeds the frame limit ${this.maxFrame}`, false);
          } else {
            this.enqueue(() => encodeFrame({ kind: Kind.Response, id: f.id, codec: f.codec, payload: reply }));
          }
        },
        (err) => {
          if (oneWay || this.ended) return;
          const e = toRpcError(err);
          this.answerError(f.id, e.code, e.detail, e.unprocessed);
        },
      )
      .finally(() => {
        clearTimeout(timer);
        if (this.serving.get(f.id) === ctrl) this.serving.delete(f.id);
      });
  }

  private answerError(id: number, code: number, message: string, unprocessed: boolean): void {
    // The message is cut to fit the frame limit: a handler's error text is not worth a lost answer.
    const body = errorBody(code, message).subarray(0, this.maxFrame - HEADER_SIZE);
    this.enqueue(() => encodeFrame({ kind: Kind.Error, id, flags: unprocessed ? Flag.Unprocessed : 0, payload: body }));
  }

  // ----- Publish and subscribe -----

  /**
   * Subscribes to pattern (wildcards `*` and a final `>`) and resolves once the subscription is
   * live, after a round trip (a call to Sys/Ping; any answer will do): a refusal (a limit,
   * permissions) rejects with the server's RpcError.
   */
  async subscribe(pattern: string, opts: SubscribeOptions = {}): Promise<Subscription> {
    if (this.ended || this.goAway) throw this.refusal();
    if (!validTopic(pattern, true) || pattern.length > MAX_ROUTE) throw new RpcError(Code.InvalidArgument, `bad pattern ${JSON.stringify(pattern)}`, true);
    let id: number;
    do this.lastSubId = this.lastSubId >= 0xffffffff ? 1 : this.lastSubId + 1;
    while (this.subs.has(this.lastSubId));
    id = this.lastSubId;
    const s = new Subscription(id, pattern, opts, (sub) => {
      if (this.subs.get(sub.id) !== sub) return;
      this.subs.delete(sub.id);
      if (!this.ended) this.enqueue(() => encodeFrame({ kind: Kind.Unsubscribe, id: sub.id }));
    });
    this.subs.set(id, s);
    const md: MetaEntry[] = this.opts.compression ? [['rpcd-compression', encodeUTF8(this.opts.compression)]] : [];
    this.enqueue(() => encodeFrame({ kind: Kind.Subscribe, id, route: pattern, metadata: md }));
    try {
      await this.flush();
    } catch (err) {
      s.unsubscribe();
      throw err;
    }
    if (s.isClosed) throw (await s.closed) ?? new RpcError(Code.Unknown, `subscription ${pattern} ended`);
    s.taken = true;
    return s;
  }

  /** Publishes value, as JSON, to topic. Nothing answers a Publish; a refusal goes to onPublishRefused. */
  publish(topic: string, value: unknown): void {
    this.publishRaw(topic, jsonBytes(value), { codec: Codec.JSON });
  }

  /** Publishes payload as it is, labelled with opts.codec (Raw by default), to topic. */
  publishRaw(topic: string, payload: PayloadInit, opts: { codec?: number } = {}): void {
    if (!validTopic(topic, false) || topic.length > MAX_ROUTE) throw new RpcError(Code.InvalidArgument, `bad topic ${JSON.stringify(topic)}`, true);
    const body = toBytes(payload);
    this.check(topic, [], body.length);
    this.enqueue(() => encodeFrame({ kind: Kind.Publish, codec: opts.codec ?? Codec.Raw, route: topic, payload: body }));
  }

  /**
   * Resolves once the server has acted on every frame sent before it: each Publish delivered or
   * refused (the refusals have reached onPublishRefused), each Subscribe and Unsubscribe in place.
   * It costs a call's round trip (to Sys/Ping; any answer will do).
   */
  async flush(): Promise<void> {
    try {
      await this.request(BARRIER_ROUTE, Codec.Raw, new Uint8Array(0), {});
    } catch (err) {
      if (this.ended || !(err instanceof RpcError) || err.code === Code.Unavailable) throw err;
      // Any other answer (NotFound on a server without Sys/Ping) came in order all the same.
    }
  }

  // ----- Streams -----

  /**
   * Opens a stream to the server's stream route. It returns at once; the first write waits for the
   * server to grant credit, and a refusal (no such route, too many streams) fails read, write and
   * done with an Unprocessed RpcError. opts.timeout or deadline bound the whole stream, and
   * opts.signal resets it (Canceled).
   */
  openStream(route: string, opts: StreamOptions = {}): Stream {
    const md = toEntries(opts.metadata);
    this.check(route, md, 4);
    const window = opts.window ?? this.window;
    if (!(window >= 0 && window <= MAX_WINDOW)) throw new RpcError(Code.InvalidArgument, `window ${window}: 0 to 2^31-1`, true);
    if (opts.signal?.aborted) throw new RpcError(Code.Canceled, `stream ${route} canceled before it was opened`, true);
    const at = deadlineOf(opts);
    let deadline = 0;
    if (at !== undefined) {
      const left = at - Date.now();
      if (left <= 0) throw new RpcError(Code.DeadlineExceeded, `deadline passed before stream ${route} was opened`, true);
      deadline = Math.min(Math.ceil(left), 0xffffffff);
    }
    do this.lastStreamId = this.lastStreamId >= 0xfffffffe ? 1 : this.lastStreamId === 0 ? 1 : this.lastStreamId + 2;
    while (this.streams.has(this.lastStreamId));
    const id = this.lastStreamId;
    const s = new Stream(this.link, id, route, window, 0);
    this.streams.set(id, s);
    this.enqueue(() => encodeFrame({ kind: Kind.StreamOpen, id, codec: opts.codec ?? Codec.Raw, deadline, route, metadata: md, payload: u32Body(window) }));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const signal = opts.signal;
    const onAbort = () => s.resetWith(new RpcError(Code.Canceled, `stream ${route} canceled`, false, { cause: signal?.reason }), Code.Canceled, 'canceled');
    signal?.addEventListener('abort', onAbort, { once: true });
    if (at !== undefined) {
      timer = setTimeout(() => s.resetWith(new RpcError(Code.DeadlineExceeded, `deadline of stream ${route} passed`), Code.DeadlineExceeded, 'deadline passed'), at - Date.now());
    }
    s.onFinish = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    return s;
  }

  private accept(f: Frame): void {
    if (f.id % 2 === 1) throw new ProtocolError('StreamOpen with an odd id from the server');
    if (this.streams.has(f.id)) throw new ProtocolError(`StreamOpen for stream ${f.id}, already open`);
    const credit = readU32(f.payload);
    if (credit > MAX_WINDOW) throw new ProtocolError('StreamOpen window past 2^31-1');
    const reset = (code: number, msg: string) =>
      this.enqueue(() => encodeFrame({ kind: Kind.StreamReset, id: f.id, flags: Flag.Unprocessed, payload: errorBody(code, msg) }));
    const fn = this.streamHandlers.get(f.route);
    if (fn === undefined) return reset(Code.NotFound, `no stream route ${f.route}`);
    if (this.accepted >= MAX_ACCEPTED_STREAMS) return reset(Code.ResourceExhausted, 'too many streams open on this connection');
    const s = new Stream(this.link, f.id, f.route, this.window, credit);
    this.streams.set(f.id, s);
    this.accepted++;
    this.enqueue(() => encodeFrame({ kind: Kind.StreamCredit, id: f.id, payload: u32Body(this.window) }));
    const ctrl = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    if (f.deadline > 0) {
      timer = setTimeout(() => s.resetWith(new RpcError(Code.DeadlineExceeded, `deadline of stream ${f.route} passed`), Code.DeadlineExceeded, 'deadline passed'), f.deadline);
    }
    s.onFinish = () => {
      clearTimeout(timer);
      ctrl.abort(new RpcError(Code.Canceled, `stream ${f.route} finished`));
    };
    const call: IncomingCall = {
      id: f.id,
      route: f.route,
      codec: f.codec,
      metadata: new Metadata(f.metadata),
      signal: ctrl.signal,
      oneWay: false,
      ...(f.deadline > 0 ? { deadline: Date.now() + f.deadline } : {}),
    };
    Promise.resolve()
      .then(() => fn(s, call))
      .then(
        () => {
          if (s.isFinished) return;
          s.closeWrite();
          s.resetWith(null, Code.OK, '');
        },
        (err) => {
          const e = toRpcError(err);
          s.resetWith(e, e.code, e.detail, e.unprocessed ? Flag.Unprocessed : 0);
        },
      );
  }

  // ----- The connection -----

  /**
   * Closes the connection at once. Calls still waiting fail with Unavailable (their fate unknown),
   * streams and subscriptions end; closed resolves to undefined.
   */
  close(): void {
    if (this.ended) return;
    this.shutdown(new RpcError(Code.Unavailable, 'client closed'), undefined);
    this.transport.close();
  }

  // Queues one outgoing frame, in order: make runs when the frames before it have gone out, and
  // returns the bytes, or null to send nothing.
  private enqueue(make: Make): void {
    if (this.ended) return;
    if (this.outPending === 0) {
      const r = make();
      if (!(r instanceof Promise)) {
        if (r) this.transport.write(r);
        return;
      }
      this.outPending++;
      this.outTail = r.then((b) => this.write(b), bug).finally(() => this.outPending--);
      return;
    }
    this.outPending++;
    this.outTail = this.outTail
      .then(make)
      .then((b) => this.write(b), bug)
      .finally(() => this.outPending--);
  }

  private write(b: Uint8Array | null): void {
    if (b && !this.ended) this.transport.write(b);
  }

  // Runs task after the inbound tasks before it, in order; frames that need expanding make it wait.
  private inbound(task: Task): void {
    const fail = (err: unknown) => {
      if (err instanceof ProtocolError) this.protocolError(err.message);
      else queueMicrotask(() => {
        throw err;
      });
    };
    if (this.inPending === 0) {
      let r: void | Promise<void>;
      try {
        r = task();
      } catch (err) {
        fail(err);
        return;
      }
      if (r instanceof Promise) {
        this.inPending++;
        this.inTail = r.catch(fail).finally(() => this.inPending--);
      }
      return;
    }
    this.inPending++;
    this.inTail = this.inTail
      .then(task)
      .catch(fail)
      .finally(() => this.inPending--);
  }

  private onData(chunk: Uint8Array): void {
    if (this.ended) return;
    let frames: Frame[];
    try {
      frames = this.reader.push(chunk);
    } catch (err) {
      if (err instanceof ProtocolError) {
        const m = err.message;
        this.inbound(() => this.protocolError(m));
        return;
      }
      throw err;
    }
    for (const f of frames) this.inbound(() => this.onFrame(f));
  }

  private onFrame(f: Frame): void | Promise<void> {
    if (this.ended) return;
    switch (f.kind) {
      case Kind.Response: {
        const p = this.calls.get(f.id);
        if (p === undefined) return; // late, after a Cancel, or stray: dropped
        if ((f.flags & Flag.CompressionMask) === 0) return this.settle(p)?.resolve({ payload: f.payload, codec: f.codec });
        return this.expand(f).then(
          (payload) => this.settle(p)?.resolve({ payload, codec: f.codec }),
          (err) => this.settle(p)?.reject(new RpcError(Code.DataLoss, `reply of ${p.route} does not expand: ${(err as Error).message}`)),
        );
      }
      case Kind.Error: {
        const { code, message } = parseErrorBody(f.payload);
        const err = new RpcError(code, message, (f.flags & Flag.Unprocessed) !== 0);
        if (f.id === 0) {
          this.refusedPublishes++;
          this.opts.onPublishRefused?.(err);
          return;
        }
        this.settle(this.calls.get(f.id))?.reject(err);
        return;
      }
      case Kind.Request:
      case Kind.OneWay: {
        if (this.welcome) throw new ProtocolError(`${kindName(f.kind)} before the Welcome`);
        if ((f.flags & Flag.CompressionMask) === 0) return this.serve(f, f.payload);
        return this.expand(f).then(
          (payload) => this.serve(f, payload),
          (err) => {
            if (f.kind === Kind.OneWay) return;
            const over = err instanceof RangeError;
            this.answerError(f.id, over ? Code.ResourceExhausted : Code.InvalidArgument, `payload of ${f.route} ${over ? 'expands past the frame limit' : 'does not expand'}`, true);
          },
        );
      }
      case Kind.Cancel:
        this.serving.get(f.id)?.abort(new RpcError(Code.Canceled, 'canceled by the server'));
        return;
      case Kind.Ping:
        this.enqueue(() => encodeFrame({ kind: Kind.Pong, payload: f.payload }));
        return;
      case Kind.Pong: {
        const i = this.pings.findIndex((p) => equalBytes(p.payload, f.payload));
        if (i < 0) return;
        const [p] = this.pings.splice(i, 1);
        p!.resolve(now() - p!.t0);
        return;
      }
      case Kind.GoAway: {
        const g: GoAway = { last: readU32(f.payload), ...parseErrorBody(f.payload.subarray(4)) };
        this.goAway = g;
        this.opts.onGoAway?.(g);
        if (this.welcome) {
          this.welcome.reject(new RpcError(g.code, g.message, true));
          this.welcome = null;
        }
        return;
      }
      case Kind.Welcome: {
        if (!this.welcome) throw new ProtocolError('a Welcome the client did not ask for');
        this.identity = decodeUTF8(f.payload);
        const list = metaBytes(f.metadata, 'rpcd-compression');
        if (list && this.opts.compression && decodeUTF8(list).split(',').map((s) => s.trim()).includes(this.opts.compression)) {
          this.compression = this.opts.compression;
        }
        this.welcome.resolve();
        this.welcome = null;
        return;
      }
      case Kind.Message: {
        if (!validTopic(f.route, false)) throw new ProtocolError('a Message with a malformed topic');
        const s = this.subs.get(f.id);
        if (s === undefined) return; // unsubscribed while it was on its way
        if ((f.flags & Flag.CompressionMask) === 0) return s.deliver(new Message(f.route, f.codec, f.payload));
        return this.expand(f).then(
          (payload) => s.deliver(new Message(f.route, f.codec, payload)),
          () => {
            s.dropped++;
          },
        );
      }
      case Kind.Unsubscribe: {
        const s = this.subs.get(f.id);
        if (s === undefined) return;
        this.subs.delete(f.id);
        // Before the subscription was taken in, its end is a refusal: it never was in place.
        if (f.payload.length >= 2) {
          const { code, message } = parseErrorBody(f.payload);
          s.end(new RpcError(code, `subscription ${s.pattern} ended by the server: ${message}`, !s.taken));
        } else {
          s.end(new RpcError(Code.Unknown, `subscription ${s.pattern} ended by the server, no reason given`, !s.taken));
        }
        return;
      }
      case Kind.StreamOpen:
        if (this.welcome) throw new ProtocolError('StreamOpen before the Welcome');
        return this.accept(f);
      case Kind.StreamData: {
        const s = this.streams.get(f.id);
        if (s === undefined) return;
        const comp = f.flags & Flag.CompressionMask;
        if (comp === 0) return s.onData(f.payload);
        if (comp !== Flag.Gzip) {
          s.resetWith(new RpcError(Code.InvalidArgument, `stream ${s.route}: data in a compression this client does not do`), Code.InvalidArgument, 'compression not supported');
          return;
        }
        return gunzip(f.payload, Math.min(s.room, this.maxFrame - HEADER_SIZE - metadataLength(f.metadata))).then(
          (p) => s.onData(p),
          (err) => {
            if (err instanceof RangeError) throw new ProtocolError('compressed stream data expands beyond the window granted or the frame limit');
            s.resetWith(new RpcError(Code.InvalidArgument, `stream ${s.route}: data does not expand`), Code.InvalidArgument, 'stream data does not expand');
          },
        );
      }
      case Kind.StreamCredit: {
        const n = readU32(f.payload);
        if (n === 0 || n > MAX_WINDOW) throw new ProtocolError('StreamCredit not 1 to 2^31-1');
        this.streams.get(f.id)?.onCredit(n);
        return;
      }
      case Kind.StreamEnd:
        this.streams.get(f.id)?.onEnd();
        return;
      case Kind.StreamReset: {
        const { code, message } = parseErrorBody(f.payload);
        if (code === Code.OK && f.id % 2 === 0) throw new ProtocolError('StreamReset with code 0 from the stream opener');
        this.streams.get(f.id)?.onReset(code, message, f.flags);
        return;
      }
      default:
        // Subscribe, Publish and Hello: kinds a server does not send.
        throw new ProtocolError(`${kindName(f.kind)} sent to a client`);
    }
  }

  // Expands a compressed payload within the room its frame has under the frame limit.
  private async expand(f: Frame): Promise<Uint8Array> {
    if ((f.flags & Flag.CompressionMask) !== Flag.Gzip) throw new TypeError('a compression this client does not do');
    return gunzip(f.payload, this.maxFrame - HEADER_SIZE - f.route.length - metadataLength(f.metadata));
  }

  // A frame broke the protocol: a GoAway naming the rule, then the end of the connection. What
  // waits on it fails as on any connection lost (Unavailable); closed resolves to the reason.
  private protocolError(rule: string): void {
    if (this.ended) return;
    this.transport.write(encodeFrame({ kind: Kind.GoAway, payload: goAwayBody(this.lastServerCall, Code.Internal, rule) }));
    this.shutdown(new RpcError(Code.Unavailable, `protocol error: ${rule}`), new RpcError(Code.Internal, `protocol error: ${rule}`));
    this.transport.close();
  }

  // The transport closed.
  private lost(err?: Error): void {
    if (this.ended) return;
    const g = this.goAway;
    const why = g ? `connection closed after GoAway ${g.code}: ${g.message}` : `connection lost${err ? ': ' + err.message : ''}`;
    const reason = new RpcError(g && g.code !== Code.Unavailable ? g.code : Code.Unavailable, why);
    this.shutdown(reason, reason);
  }

  // Ends everything: calls waiting (err, Unprocessed for those after a GoAway's last id), calls
  // served, streams, subscriptions, pings, the handshake.
  private shutdown(err: RpcError, closedWith: RpcError | undefined): void {
    this.ended = err;
    for (const p of [...this.calls.values()]) {
      this.calls.delete(p.id);
      p.cleanup();
      const unprocessed = !p.sent || (this.goAway !== undefined && idAfter(p.id, this.goAway.last));
      p.reject(new RpcError(err.code, err.detail, unprocessed));
    }
    for (const c of this.serving.values()) c.abort(err);
    this.serving.clear();
    for (const s of [...this.streams.values()]) s.finish(new RpcError(Code.Unavailable, `stream ${s.route}: ${err.detail}`));
    for (const s of [...this.subs.values()]) s.end(new RpcError(Code.Unavailable, `subscription ${s.pattern}: ${err.detail}`));
    this.subs.clear();
    for (const p of this.pings.splice(0)) p.reject(err);
    if (this.welcome) {
      this.welcome.reject(err);
      this.welcome = null;
    }
    this.resolveClosed(closedWith);
  }
}

/** connectTransport makes a client on an open transport: the Hello, if any, then its Welcome. */
/**
 * @internal openWithin runs open, which opens a transport, with a signal that aborts once ms pass
 * or signal aborts; past ms it rejects with DeadlineExceeded, so that a server that takes the
 * connection and never answers (a hung proxy, a wrong port) cannot hang connect.
 */
export async function openWithin<T>(ms: number, signal: AbortSignal | undefined, open: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const ac = new AbortController();
  let late = false;
  const timer = setTimeout(() => {
    late = true;
    ac.abort();
  }, ms);
  const onAbort = () => ac.abort();
  if (signal?.aborted) ac.abort();
  else signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await open(ac.signal);
  } catch (err) {
    if (late) throw new RpcError(Code.DeadlineExceeded, `no connection within ${ms} ms`, true, { cause: err });
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

export async function connectTransport(transport: Transport, options: ClientOptions = {}): Promise<Client> {
  let c: Client;
  try {
    c = new Client(transport, options);
  } catch (err) {
    transport.close();
    throw err;
  }
  await c.start();
  return c;
}
