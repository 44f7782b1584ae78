// The test harness: starts `rpcd serve` from $RPCD_BIN on ports of its own, and a transport spy.

import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * startServer runs `$RPCD_BIN serve -addr 127.0.0.1:0 -gateway 127.0.0.1:0 ...args` and resolves
 * once both listeners are logged: { addr, gateway, ws, stop }. stop() sends SIGTERM and resolves
 * with the exit code once the server has drained and exited.
 */
export function startServer(args = []) {
  const bin = process.env.RPCD_BIN;
  if (!bin) throw new Error('RPCD_BIN is not set: build rpcd (go build -o /tmp/rpcd-ts ./cmd/rpcd) and export RPCD_BIN=/tmp/rpcd-ts');
  const proc = spawn(bin, ['serve', '-addr', '127.0.0.1:0', '-gateway', '127.0.0.1:0', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve(code ?? signal)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`rpcd serve did not log its addresses within 10 s:\n${log}`));
    }, 10_000);
    const look = () => {
      const addr = /msg="rpcd: serving".* addr=(\S+)/.exec(log)?.[1];
      const gateway = /msg="rpcd: gateway serving".* gateway=(\S+)/.exec(log)?.[1];
      if (!addr || !gateway) return;
      clearTimeout(timer);
      resolve({
        addr,
        gateway,
        ws: `ws://${gateway}/ws`,
        proc,
        log: () => log,
        stop: async () => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
          return exited;
        },
      });
    };
    proc.stderr.setEncoding('utf8');
    proc.stderr.on('data', (d) => {
      log += d;
      look();
    });
    proc.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`rpcd serve exited (${code}) before it served:\n${log}`));
    });
  });
}

/** A file holding lines, for flags that take one (-auth-tokens). */
export function tempFile(name, text) {
  const dir = mkdtempSync(join(tmpdir(), 'rpcd-ts-'));
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

/** parseHeader reads the fields of a frame's 24-byte header. */
export function parseHeader(b) {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  return {
    kind: b[3],
    flags: b[4],
    codec: b[5],
    routeLen: dv.getUint16(6),
    id: dv.getUint32(8),
    deadline: dv.getUint32(12),
    mdLen: dv.getUint16(16),
    payloadLen: dv.getUint32(20),
  };
}

/**
 * spy wraps a transport: it records every frame written (sent) and every chunk read (received,
 * parsed back into headers when they hold whole frames, as rpcd sends them), and lets a test drop
 * frames on their way out (drop(header) returning true).
 */
export function spy(t, { drop } = {}) {
  const sent = [];
  const received = [];
  let pending = Buffer.alloc(0);
  return {
    sent,
    received,
    start(events) {
      t.start({
        data(chunk) {
          // Chunks hold several frames, or part of one: split the bytes by the frames' lengths.
          pending = Buffer.concat([pending, chunk]);
          for (;;) {
            if (pending.length < 24) break;
            const h = parseHeader(pending);
            const n = 24 + h.routeLen + h.mdLen + h.payloadLen;
            if (pending.length < n) break;
            received.push({ ...h, bytes: new Uint8Array(pending.subarray(0, n)) });
            pending = pending.subarray(n);
          }
          events.data(chunk);
        },
        close(err) {
          events.close(err);
        },
      });
    },
    write(frame) {
      const h = { ...parseHeader(frame), bytes: frame };
      sent.push(h);
      if (drop?.(h)) return;
      t.write(frame);
    },
    drain: () => t.drain(),
    close: () => t.close(),
  };
}

/** until polls cond every 5 ms until it is true, failing after ms. */
export async function until(cond, ms = 3000, what = 'condition') {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
