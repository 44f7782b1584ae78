// The seam between the client and a connection.

/** What a transport tells the client. */
export interface TransportEvents {
  /** Bytes from the server: whole frames, several, or part of one; the client reassembles them. */
  data(chunk: Uint8Array): void;
  /** The connection ended (err says why when it failed); called once, and nothing after it. */
  close(err?: Error): void;
}

/**
 * Transport is one connection to an rpcd server, open when the client gets it. It carries bytes
 * both ways; {@link Transport.write} takes one whole frame at a time, so that a WebSocket
 * transport sends it as one binary message, as docs/protocol.md ("WebSocket") requires.
 */
export interface Transport {
  /** Starts delivering to events; the client calls it once, before anything else. */
  start(events: TransportEvents): void;
  /** Sends one whole frame. It never blocks: a transport queues what the connection has not taken. */
  write(frame: Uint8Array): void;
  /** Resolves once the output queued is small again (under a transport's own mark), so that a writer can wait. */
  drain(): Promise<void>;
  /** Ends the connection. Idempotent; events.close follows, once. */
  close(): void;
}

/** The least a WebSocket must offer: the WHATWG WebSocket, which browsers, Deno, Bun and Node 22 have. */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  readonly protocol: string;
  readonly bufferedAmount: number;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
}

/** A WebSocket constructor, as `globalThis.WebSocket` is. */
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

/** The WebSocket subprotocol rpcd takes. */
export const SUBPROTOCOL = 'rpcd';

/** Options of {@link webSocketTransport}. */
export interface WebSocketOptions {
  /** The WebSocket class; `globalThis.WebSocket` when left out. */
  WebSocket?: WebSocketConstructor;
  /** Bytes queued in the socket past which drain waits; 1 MiB when left out. */
  highWaterMark?: number;
  /** Abandons the opening when aborted. */
  signal?: AbortSignal;
}

/**
 * webSocketTransport opens a WebSocket to url (`ws://host:port/ws`, or `wss://`) asking for the
 * `rpcd` subprotocol, and resolves once it is open. It uses the platform's WebSocket: every
 * browser's, and Node 22's; on Node 20 use the `@rpcd/client/node` entry's transports.
 */
export function webSocketTransport(url: string, options: WebSocketOptions = {}): Promise<Transport> {
  const WS = options.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (WS === undefined) {
    return Promise.reject(new Error('rpcd: no WebSocket in this runtime: pass options.WebSocket, or on Node use @rpcd/client/node'));
  }
  const mark = options.highWaterMark ?? 1 << 20;
  return new Promise((resolve, reject) => {
    let ws: WebSocketLike;
    try {
      ws = new WS(url, SUBPROTOCOL);
    } catch (err) {
      reject(err);
      return;
    }
    ws.binaryType = 'arraybuffer';
    let events: TransportEvents | null = null;
    let opened = false;
    let ended = false;
    const early: Uint8Array[] = [];
    const end = (err?: Error) => {
      if (ended) return;
      ended = true;
      options.signal?.removeEventListener('abort', onAbort);
      if (!opened) reject(err ?? new Error(`rpcd: WebSocket to ${url} closed before it opened`));
      else events?.close(err);
    };
    const onAbort = () => {
      ws.close();
      end(new Error(`rpcd: WebSocket to ${url}: opening aborted`));
    };
    options.signal?.addEventListener('abort', onAbort);
    ws.onopen = () => {
      if (ended) return;
      if (ws.protocol !== SUBPROTOCOL) {
        ws.close(1002, 'no rpcd subprotocol');
        end(new Error(`rpcd: ${url} did not take the rpcd subprotocol`));
        return;
      }
      opened = true;
      options.signal?.removeEventListener('abort', onAbort);
      resolve(transport);
    };
    ws.onmessage = (ev) => {
      const d = ev.data;
      if (!(d instanceof ArrayBuffer)) {
        // rpcd sends only binary messages; a text one is not a frame.
        ws.close(1003, 'rpcd frames go in binary messages');
        end(new Error('rpcd: a text message on the WebSocket'));
        return;
      }
      const chunk = new Uint8Array(d);
      if (events) events.data(chunk);
      else early.push(chunk);
    };
    ws.onerror = () => {
      // A close event follows with the code; the error event says nothing more.
    };
    ws.onclose = (ev) => {
      end(ev.code === 1000 || ev.code === 1005 ? undefined : new Error(`rpcd: WebSocket closed with code ${ev.code}${ev.reason ? ': ' + ev.reason : ''}`));
    };
    const transport: Transport = {
      start(e) {
        events = e;
        for (const c of early.splice(0)) e.data(c);
        if (ended) e.close();
      },
      write(frame) {
        if (!ended) ws.send(frame);
      },
      async drain() {
        while (!ended && ws.bufferedAmount > mark) await new Promise((r) => setTimeout(r, 5));
      },
      close() {
        if (ended) return;
        ws.close(1000);
        // The close event comes once the server answers; the client is done with it now.
        end();
      },
    };
  });
}
