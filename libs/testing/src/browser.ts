/**
 * A real browser for tests: Debian's Chromium driven by playwright-core (never a downloaded
 * browser; `make test-tools` installs it), and pages of a test's own served from another origin
 * (an esbuild bundle of a test entry point, as an app would ship it).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import { chromium, type Browser } from 'playwright-core';
import { chromiumPath, chromiumUnavailableReason } from './chromium.js';

/**
 * Starts headless Chromium. Close it in `afterAll`.
 * @throws Error when Chromium is not installed (run `make test-tools`)
 */
export async function launchChromium(): Promise<Browser> {
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error(chromiumUnavailableReason());
  // As root (CI, the dev machine) Chromium's own sandbox cannot start; the pages are the tests' own.
  return chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
}

export interface PageBundleOptions {
  /** The page's TypeScript/TSX entry point (absolute path). */
  entry: string;
  /** Globals replaced at build time, e.g. `{ 'process.env.NODE_ENV': '"production"' }`. */
  define?: Record<string, string>;
  /** Markup placed in `<body>` before the script. @default '<div id="root"></div>' */
  body?: string;
}

export interface ServedPage {
  /** `http://127.0.0.1:<port>`: the page's origin (a different one from any server under test). */
  origin: string;
  /** The page itself (`/`). */
  url: string;
  close(): Promise<void>;
}

/** Bundles `entry` for the browser and serves it as `/` on a free loopback port. */
export async function servePage(options: PageBundleOptions): Promise<ServedPage> {
  const bundle = await build({
    entryPoints: [options.entry],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'browser',
    target: 'chrome120',
    jsx: 'automatic',
    logLevel: 'silent',
    define: { 'process.env.NODE_ENV': '"production"', ...options.define },
  });
  const script = bundle.outputFiles[0]!.text;
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>test page</title></head><body>${
    options.body ?? '<div id="root"></div>'
  }<script type="module" src="/app.js"></script></body></html>`;
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    if (path === '/app.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(script);
    else if (path === '/favicon.ico') res.writeHead(204).end();
    else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    origin,
    url: `${origin}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
