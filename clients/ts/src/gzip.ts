// gzip through the platform's CompressionStream and DecompressionStream (every current browser,
// and Node 18 and later), so that the package has no dependency. Zstandard has no such API and
// is left out: this client never names it.

/** gzipAvailable reports whether this runtime has CompressionStream and DecompressionStream. */
export function gzipAvailable(): boolean {
  return typeof CompressionStream === 'function' && typeof DecompressionStream === 'function';
}

async function collect(readable: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const reader = readable.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > limit) {
      reader.cancel().catch(() => {});
      throw new RangeError(`expands past ${limit} bytes`);
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(n);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

async function pipe(data: Uint8Array, ts: { readable: ReadableStream<Uint8Array>; writable: WritableStream<BufferSource> }, limit: number): Promise<Uint8Array> {
  const w = ts.writable.getWriter();
  // Errors surface on the readable side; these only keep them from going unhandled.
  w.write(data as unknown as BufferSource).catch(() => {});
  w.close().catch(() => {});
  return collect(ts.readable, limit);
}

/** gzip compresses data into one gzip member. */
export function gzip(data: Uint8Array): Promise<Uint8Array> {
  return pipe(data, new CompressionStream('gzip') as never, Number.MAX_SAFE_INTEGER);
}

/**
 * gunzip expands gzip data, failing with RangeError past limit bytes (it stops reading there) and
 * with the platform's error for data that is not gzip, or empty.
 */
export async function gunzip(data: Uint8Array, limit: number): Promise<Uint8Array> {
  if (data.length === 0) throw new TypeError('empty compressed payload');
  return pipe(data, new DecompressionStream('gzip') as never, limit);
}
