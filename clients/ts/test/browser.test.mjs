// The browser entry in headless Chromium (Debian's, $CHROMIUM or /usr/bin/chromium, driven by
// playwright-core): a node:http server serves test/page.html, test/page.js and dist/, and the page
// runs its checks against `rpcd serve`'s gateway at ws://…/ws. Skips when Chromium is absent.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startServer } from './harness.mjs';

const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const root = fileURLToPath(new URL('..', import.meta.url));
const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.map': 'application/json' };

// Serves test/ and dist/ under root, nothing else.
function staticServer() {
  const srv = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    const file = join(root, path);
    const allowed = [join(root, 'test') + sep, join(root, 'dist') + sep].some((d) => file.startsWith(d));
    if (!allowed || !existsSync(file) || !types[extname(file)]) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': types[extname(file)], 'cache-control': 'no-store' }).end(readFileSync(file));
  });
  return new Promise((resolve) => srv.listen(0, '127.0.0.1', () => resolve(srv)));
}

const skip = existsSync(chromiumPath) ? false : `no Chromium at ${chromiumPath} (apt-get install chromium)`;
let rpcd;
let http;
let browser;

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  [rpcd, http, browser] = await Promise.all([
    startServer(),
    staticServer(),
    chromium.launch({
      executablePath: chromiumPath,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    }),
  ]);
});

after(async () => {
  await browser?.close();
  http?.close();
  if (rpcd) assert.equal(await rpcd.stop(), 0, 'rpcd drained and exited 0');
});

test('the browser entry in headless Chromium against the gateway', { skip, timeout: 60_000 }, async (t) => {
  const page = await browser.newPage();
  const console = [];
  page.on('console', (m) => console.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => console.push(`page error: ${e.message}`));
  const url = `http://127.0.0.1:${http.address().port}/test/page.html?ws=${encodeURIComponent(rpcd.ws)}`;
  await page.goto(url);
  try {
    await page.waitForFunction(() => window.results !== undefined, null, { timeout: 45_000 });
  } catch (err) {
    assert.fail(`the page gave no results: ${err.message}\n${console.join('\n')}`);
  }
  const results = await page.evaluate(() => window.results);
  assert.ok(results.length >= 7, `only ${results.length} checks ran:\n${console.join('\n')}`);
  for (const r of results) {
    await t.test(r.name, () => assert.ok(r.ok, r.error));
  }
  await page.close();
});
