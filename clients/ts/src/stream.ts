// A stream's two directions and their flow control (docs/protocol.md, "Streams").

import { Code, RpcError } from './errors.js';
import { encodeFrame, errorBody, Flag, Kind, MAX_WINDOW, ProtocolError, u32Body } from './wire.js';

/** The most stream bytes this client puts in one StreamData, as rpcd does. */
export const MAX_CHUNK = 32 * 1024;

/** What a stream needs of its connection. */
export interface StreamLink {
  /** Queues one frame, in order with the connection's others. */
  send(frame: Uint8Array): void;
  /** Resolves when the connection's output is small again. */
  drain(): Promise<void>;
  /** The stream is finished: forget its id. */
  forget(s: Stream): void;
  /** The most stream bytes a StreamData may hold under the peer's frame limit. */
  readonly maxChunk: number;
}

type Waiter = () => void;

/**
 * Stream is one stream, opened by this client ({@link Client.openStream}) or by the server (a
 * handler of {@link Client.handleStream}). Each direction is flow-controlled: {@link write} waits
 * while the other end has granted no credit, and {@link read} grants back what it returns, so that
 * no more than the window waits unread.
 */
export class Stream implements AsyncIterable<Uint8Array> {
  /** The stream id: odd when this client opened it, even when the server did. */
  readonly id: number;
  /** The stream route. */
  readonly route: string;
  /**
   * Resolves when the stream finished well (the acceptor's StreamReset with code 0), rejects with
   * an RpcError when it failed, was refused (Unprocessed), reset, or its connection was lost.
   */
  readonly done: Promise<void>;

  private readonly link: StreamLink;
  private readonly window: number;
  // Receiving.
  private buf: Uint8Array[] = [];
  private bufBytes = 0;
  private granted: number; // bytes the other end may still send
  private unacked = 0; // bytes read and not yet granted back
  private recvEnd = false;
  // Sending.
  private credit: number;
  private sendEnd = false;
  // Both.
  private finished = false;
  private err: RpcError | null = null;
  private waiters: Waiter[] = [];
  private settle!: { resolve: () => void; reject: (e: RpcError) => void };
  /** @internal Runs once the stream finishes (timers to stop). */
  onFinish: (() => void) | null = null;

  /** @internal */
  constructor(link: StreamLink, id: number, route: string, window: number, credit: number) {
    this.link = link;
    this.id = id;
    this.route = route;
    this.window = window;
    this.granted = window;
    this.credit = credit;
    this.done = new Promise<void>((resolve, reject) => {
      this.settle = { resolve, reject };
    });
    this.done.catch(() => {}); // read, write and done report it; none of them need be awaited
  }

  /**
   * Reads the next bytes of the stream: a chunk as it came, or null at its end (the other end's
   * StreamEnd, or a stream that finished well). Rejects with the stream's error when it failed.
   */
  async read(): Promise<Uint8Array | null> {
    for (;;) {
      const chunk = this.buf.shift();
      if (chunk !== undefined) {
        this.bufBytes -= chunk.length;
        if (!this.finished && !this.recvEnd) {
          this.unacked += chunk.length;
          if (this.unacked >= this.window / 4 || (this.bufBytes === 0 && this.unacked >= this.window / 16)) {
            const grant = this.unacked;
            this.unacked = 0;
            this.granted += grant;
            this.link.send(encodeFrame({ kind: Kind.StreamCredit, id: this.id, payload: u32Body(grant) }));
          }
        }
        return chunk;
      }
      if (this.err) throw this.err;
      if (this.recvEnd || this.finished) return null;
      await this.wait();
    }
  }

  /** Reads to the end and returns every byte. */
  async readAll(): Promise<Uint8Array> {
    const chunks: Uint8Array[] = [];
    let n = 0;
    for (let c = await this.read(); c !== null; c = await this.read()) {
      chunks.push(c);
      n += c.length;
    }
    const out = new Uint8Array(n);
    let o = 0;
    for (const c of chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    for (let c = await this.read(); c !== null; c = await this.read()) yield c;
  }

  /**
   * Writes data, in StreamData of 32 KiB at most, each once the other end has granted the credit
   * for it. Resolves true once all of it is queued, false when the other end finished the stream
   * well before it was (its handler returned and reads no more). Rejects with the stream's error
   * when it failed, and with FailedPrecondition after {@link closeWrite}.
   */
  async write(data: Uint8Array | string): Promise<boolean> {
    let p = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    while (p.length > 0) {
      if (this.err) throw this.err;
      if (this.finished) return false;
      if (this.sendEnd) throw new RpcError(Code.FailedPrecondition, `stream ${this.route}: write after closeWrite`);
      if (this.credit === 0) {
        await this.wait();
        continue;
      }
      const n = Math.min(p.length, this.credit, MAX_CHUNK, this.link.maxChunk);
      this.credit -= n;
      this.link.send(encodeFrame({ kind: Kind.StreamData, id: this.id, payload: p.subarray(0, n) }));
      p = p.subarray(n);
      await this.link.drain();
    }
    return true;
  }

  /** Ends this side's direction (StreamEnd): the other end reads to the end; reading goes on. */
  closeWrite(): void {
    if (this.sendEnd || this.finished) return;
    this.sendEnd = true;
    this.link.send(encodeFrame({ kind: Kind.StreamEnd, id: this.id }));
  }

  /**
   * Abandons the stream: sends StreamReset with code (Canceled by default) unless it is finished
   * already; read and write then fail with that error.
   */
  reset(code: number = Code.Canceled, message = 'reset by the client'): void {
    this.resetWith(new RpcError(code, `stream ${this.route}: ${message}`), code, message);
  }

  /** @internal Finishes the stream from this end, sending StreamReset(code, message). */
  resetWith(err: RpcError | null, code: number, message: string, flags = 0): void {
    if (this.finish(err)) {
      this.link.send(encodeFrame({ kind: Kind.StreamReset, id: this.id, flags, payload: errorBody(code, message) }));
    }
  }

  /** @internal The bytes this end may still receive. */
  get room(): number {
    return this.granted;
  }

  /** @internal Takes a StreamData's bytes (expanded). */
  onData(p: Uint8Array): void {
    if (this.finished) return;
    if (this.recvEnd) throw new ProtocolError('StreamData after StreamEnd');
    if (p.length > this.granted) throw new ProtocolError('stream data beyond the window granted');
    this.granted -= p.length;
    if (p.length > 0) {
      this.buf.push(p);
      this.bufBytes += p.length;
    }
    this.wake();
  }

  /** @internal Takes a StreamCredit. */
  onCredit(n: number): void {
    if (this.finished) return;
    if (this.credit + n > MAX_WINDOW) throw new ProtocolError('stream credit past 2^31-1');
    this.credit += n;
    this.wake();
  }

  /** @internal Takes the other end's StreamEnd. */
  onEnd(): void {
    if (this.finished) return;
    if (this.recvEnd) throw new ProtocolError('a second StreamEnd');
    this.recvEnd = true;
    this.wake();
  }

  /** @internal Takes the other end's StreamReset: code 0 keeps what came readable. */
  onReset(code: number, message: string, flags: number): void {
    this.finish(code === Code.OK ? null : new RpcError(code, message, (flags & Flag.Unprocessed) !== 0));
  }

  /** @internal Marks the stream finished with err (null: well); reports whether this call did. */
  finish(err: RpcError | null): boolean {
    if (this.finished) return false;
    this.finished = true;
    this.err = err;
    if (err) {
      this.buf = []; // a failed stream's unread bytes are dropped
      this.bufBytes = 0;
      this.settle.reject(err);
    } else {
      this.settle.resolve();
    }
    this.link.forget(this);
    this.onFinish?.();
    this.wake();
    return true;
  }

  /** @internal Whether this end has ended its direction. */
  get writeClosed(): boolean {
    return this.sendEnd;
  }

  /** @internal */
  get isFinished(): boolean {
    return this.finished;
  }

  private wait(): Promise<void> {
    return new Promise((r) => this.waiters.push(r));
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const r of w) r();
  }
}
