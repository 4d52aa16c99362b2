/**
 * Serving the built console (the `console/` workspace: index.html and hashed files in assets/):
 * the gateway serves it at its root, and `berth dev`'s agent server serves it at `/studio`. The
 * build is one for both (vite `base: './'`): index.html names its files `./assets/…`, which each
 * server turns into where it serves them (`/assets/…`, `/studio/assets/…`) as it sends the page;
 * inside the files every reference is relative (chunks, fonts), so they work under either.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { NotFoundError } from '@berth/errors';
import type { Request, Response } from 'express';

/** What the console's pages may load and reach: this origin only. */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const IMMUTABLE = 'public, max-age=31536000, immutable';

const TYPES: Record<string, { type: string; gzip: boolean }> = {
  '.js': { type: 'text/javascript; charset=utf-8', gzip: true },
  '.css': { type: 'text/css; charset=utf-8', gzip: true },
  '.svg': { type: 'image/svg+xml', gzip: true },
  '.json': { type: 'application/json', gzip: true },
  '.woff2': { type: 'font/woff2', gzip: false },
  '.woff': { type: 'font/woff', gzip: false },
  '.png': { type: 'image/png', gzip: false },
};

export interface ConsoleAsset {
  type: string;
  body: Buffer;
  gzipped?: Buffer;
}

/** How a server serves the console: where its files are, and what the app is told. */
export interface ConsolePageOptions {
  /** The path the assets are served under, without a trailing slash (`/assets`, `/studio/assets`). */
  assetsPath: string;
  /**
   * `<meta name="berth-console" content="…">`: how the app runs (`studio`: Studio alone, on the
   * agent server's own API, as `berth dev` serves it). @default none: the console of the gateway
   */
  mode?: 'studio';
}

const NOT_BUILT = 'The console is not built here: run `make build` (it builds console/ with the rest).';

/**
 * The built files. index.html (under 1 KB) is read at each page load, so a rebuild while the server
 * runs is served at once; the assets are kept in memory (a few hundred KB), read again when a name
 * is asked for that is not known yet (the new index names new files).
 */
export class ConsoleFiles {
  private assets = new Map<string, ConsoleAsset>();
  private listing = '';

  constructor(
    private readonly dir: string,
    private readonly page: ConsolePageOptions,
  ) {}

  indexHtml(): string {
    let html: string;
    try {
      html = readFileSync(join(this.dir, 'index.html'), 'utf8');
    } catch (error) {
      throw new NotFoundError(NOT_BUILT, { cause: error });
    }
    html = html.replaceAll('"./assets/', `"${this.page.assetsPath}/`);
    return this.page.mode ? html.replace('</head>', `<meta name="berth-console" content="${this.page.mode}" />\n</head>`) : html;
  }

  asset(name: string): ConsoleAsset | undefined {
    if (!this.assets.has(name)) this.reload();
    return this.assets.get(name);
  }

  /** Only names listed in assets/ are served: a path param never reaches the file system. */
  private reload(): void {
    const folder = join(this.dir, 'assets');
    let names: string[];
    try {
      names = readdirSync(folder);
    } catch {
      return; // not built (yet): every asset is a 404
    }
    // Asking for unknown names costs a directory listing, not a re-read of every file.
    const listing = names.sort().join('/');
    if (listing === this.listing) return;
    this.listing = listing;
    const assets = new Map<string, ConsoleAsset>();
    for (const name of names) {
      const kind = TYPES[extname(name)];
      if (!kind) continue;
      const body = readFileSync(join(folder, name));
      assets.set(name, { type: kind.type, body, ...(kind.gzip ? { gzipped: gzipSync(body) } : {}) });
    }
    this.assets = assets;
  }

  /** Answers with the console's page (index.html), never cached, under CONSOLE_CSP. */
  sendPage(res: Response): void {
    const html = this.indexHtml();
    res.setHeader('Content-Security-Policy', CONSOLE_CSP);
    res.setHeader('X-Frame-Options', 'DENY');
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Referrer-Policy', 'same-origin');
    // A new build changes the assets index.html names: it must never be served stale.
    res.setHeader('Cache-Control', 'no-store');
    res.status(200).type('text/html; charset=utf-8').send(html);
  }

  /** Answers with an asset (cached for good, gzipped when the client takes it), or 404. */
  sendAsset(name: string, req: Request, res: Response): void {
    const asset = this.asset(name);
    if (!asset) throw new NotFoundError(`No console file ${name}`);
    const gzip = asset.gzipped && req.acceptsEncodings('gzip', 'identity') === 'gzip';
    res.setHeader('Cache-Control', IMMUTABLE);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    res.setHeader('Vary', 'Accept-Encoding');
    res.setHeader('Content-Type', asset.type);
    if (gzip) res.setHeader('Content-Encoding', 'gzip');
    res.status(200).send(gzip ? asset.gzipped : asset.body);
  }
}
