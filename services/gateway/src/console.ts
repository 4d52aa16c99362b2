/**
 * The console (the `console/` workspace: a React app built to static files) on the gateway's own
 * origin, so it calls the API with no CORS and works offline:
 * - its pages (`/`, `/sign-in`, `/deployments`, `/deployments/{deployment_id}`, `/status`, `/traces`,
 *   `/traces/{project_id}`, `/traces/{project_id}/{trace_id}`) answer index.html, never cached; the
 *   routes below are the one list of them (the console's router has the same paths, and a browser
 *   test opens each). Every other path stays the API's: an unknown one is a JSON 404.
 * - `/assets/{file}`: the build's content-hashed files, cached for good (a new build has new names),
 *   gzipped for clients that take it.
 * Pages carry a Content-Security-Policy allowing nothing but this origin: no inline script or
 * style, no other host, no framing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { consoleDir } from '@berth/console';
import { NotFoundError } from '@berth/errors';
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { GatewayApi } from './access.js';

export interface ConsoleOptions {
  /**
   * The built console (index.html and assets/).
   * @default the `@berth/console` package's dist/ (`make build` builds it)
   */
  dir?: string;
}

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

interface Asset {
  type: string;
  body: Buffer;
  gzipped?: Buffer;
}

const NOT_BUILT = 'The console is not built here: run `make build` (it builds console/ with the rest).';

/**
 * The built files. index.html (under 1 KB) is read at each page load, so a rebuild while the gateway
 * runs is served at once; the assets are kept in memory (a few hundred KB), read again when a name
 * is asked for that is not known yet (the new index names new files).
 */
class ConsoleFiles {
  private assets = new Map<string, Asset>();
  private listing = '';

  constructor(private readonly dir: string) {}

  indexHtml(): Buffer {
    try {
      return readFileSync(join(this.dir, 'index.html'));
    } catch (error) {
      throw new NotFoundError(NOT_BUILT, { cause: error });
    }
  }

  asset(name: string): Asset | undefined {
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
    const assets = new Map<string, Asset>();
    for (const name of names) {
      const kind = TYPES[extname(name)];
      if (!kind) continue;
      const body = readFileSync(join(folder, name));
      assets.set(name, { type: kind.type, body, ...(kind.gzip ? { gzipped: gzipSync(body) } : {}) });
    }
    this.assets = assets;
  }
}

function sendPage(files: ConsoleFiles, res: Response): void {
  const html = files.indexHtml();
  res.setHeader('Content-Security-Policy', CONSOLE_CSP);
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Referrer-Policy', 'same-origin');
  // A new build changes the assets index.html names: it must never be served stale.
  res.setHeader('Cache-Control', 'no-store');
  res.status(200).type('text/html; charset=utf-8').send(html);
}

function sendAsset(asset: Asset, req: Request, res: Response): void {
  const gzip = asset.gzipped && req.acceptsEncodings('gzip', 'identity') === 'gzip';
  res.setHeader('Cache-Control', IMMUTABLE);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Vary', 'Accept-Encoding');
  res.setHeader('Content-Type', asset.type);
  if (gzip) res.setHeader('Content-Encoding', 'gzip');
  res.status(200).send(gzip ? asset.gzipped : asset.body);
}

const PAGE = { access: 'public' as const, tags: ['console'], status: 200, produces: ['text/html'], errors: [404] };

export function consoleRoutes(api: GatewayApi, options: ConsoleOptions = {}): void {
  const files = new ConsoleFiles(options.dir ?? consoleDir);
  const page = ({ res }: { res: Response }) => sendPage(files, res);
  const description = 'The web console (HTML; its script reads the query itself). 404 when the console is not built.';
  api
    .route({ ...PAGE, method: 'get', path: '/', summary: 'The console: its start page', description, handler: page })
    .route({ ...PAGE, method: 'get', path: '/sign-in', summary: 'The console: sign in with an API key', description, handler: page })
    .route({ ...PAGE, method: 'get', path: '/deployments', summary: 'The console: the deployments', description, handler: page })
    .route({
      ...PAGE,
      method: 'get',
      path: '/deployments/{deployment_id}',
      summary: "The console: a deployment's page",
      description,
      // Any text: the page itself asks the API, which answers 404 for an id that is not the tenant's.
      params: z.strictObject({ deployment_id: z.string().min(1).max(64) }),
      errors: [404, 422],
      handler: page,
    })
    .route({ ...PAGE, method: 'get', path: '/status', summary: 'The console: platform status', description, handler: page })
    .route({ ...PAGE, method: 'get', path: '/traces', summary: "The console: the tenant's tracing projects", description, handler: page })
    .route({ ...PAGE, method: 'get', path: '/traces/{project_id}', summary: "The console: a tracing project's runs", description, handler: page })
    .route({
      ...PAGE,
      method: 'get',
      path: '/traces/{project_id}/{trace_id}',
      summary: 'The console: one trace, its runs as a tree and a waterfall',
      description,
      params: z.strictObject({ project_id: z.string().max(100), trace_id: z.string().max(100) }),
      handler: page,
    })
    .route({
      method: 'get',
      path: '/assets/{file}',
      access: 'public',
      summary: 'A file of the console (script, style, font, image)',
      description: 'Content-hashed names: cached for a year, immutable. Gzipped when the client accepts it.',
      tags: ['console'],
      params: z.strictObject({ file: z.string().min(1).max(255) }),
      status: 200,
      produces: ['text/javascript', 'text/css', 'font/woff2', 'image/svg+xml'],
      errors: [404],
      handler: ({ params, req, res }) => {
        const asset = files.asset(params.file);
        if (!asset) throw new NotFoundError(`No console file ${params.file}`);
        sendAsset(asset, req, res);
      },
    });
}
