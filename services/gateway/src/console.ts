/**
 * The console (the `console/` workspace: a React app built to static files) on the gateway's own
 * origin, so it calls the API with no CORS and works offline:
 * - its pages (`/`, `/sign-in`, `/deployments`, `/deployments/{deployment_id}`,
 *   `/deployments/{deployment_id}/studio`, `/status`, `/traces`,
 *   `/traces/{project_id}`, `/traces/{project_id}/{trace_id}`) answer index.html, never cached; the
 *   routes below are the one list of them (the console's router has the same paths, and a browser
 *   test opens each). Every other path stays the API's: an unknown one is a JSON 404.
 * - `/assets/{file}`: the build's content-hashed files, cached for good (a new build has new names),
 *   gzipped for clients that take it.
 * Pages carry a Content-Security-Policy allowing nothing but this origin: no inline script or
 * style, no other host, no framing.
 */
import { consoleDir } from '@berth/console';
import { ConsoleFiles } from '@berth/http';
import type { Response } from 'express';
import { z } from 'zod';
import type { GatewayApi } from './access.js';

export { CONSOLE_CSP } from '@berth/http';

export interface ConsoleOptions {
  /**
   * The built console (index.html and assets/).
   * @default the `@berth/console` package's dist/ (`make build` builds it)
   */
  dir?: string;
}

const PAGE = { access: 'public' as const, tags: ['console'], status: 200, produces: ['text/html'], errors: [404] };

export function consoleRoutes(api: GatewayApi, options: ConsoleOptions = {}): void {
  const files = new ConsoleFiles(options.dir ?? consoleDir, { assetsPath: '/assets' });
  const page = ({ res }: { res: Response }) => files.sendPage(res);
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
    .route({
      ...PAGE,
      method: 'get',
      path: '/deployments/{deployment_id}/studio',
      summary: "The console: a deployment's Studio (its graphs, run live)",
      description,
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
      handler: ({ params, req, res }) => files.sendAsset(params.file, req, res),
    });
}
