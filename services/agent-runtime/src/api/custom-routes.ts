/**
 * `http.app` of langgraph.json: the project's own fetch-style app (a Hono app, or any object with
 * `fetch(Request) → Response`) served beside the LangGraph API, as the LangGraph JS server does.
 *
 * A Hono app is composed with the built-in API the way the JS server mounts it: the user's app is
 * routed into a fresh instance of the user's own Hono class, followed by a catch-all route that
 * hands the request back to Berth. So the user's routes answer first (even on built-in paths), the
 * user's middleware wraps built-in routes too (headers it sets after `next()` reach their answers,
 * and it may answer in their place), and a path nobody serves is Berth's 404 (the user's
 * `notFound` is not used, as under the JS server). A JSON body the middleware changes does not
 * reach the built-in routes (Hono re-parses the body on each `json()`). Any other
 * fetch app answers first; its 404 falls through to the built-in routes.
 *
 * The project's custom auth runs before the app (the JS server authenticates custom routes too),
 * and a Hono app's handlers read the result as the JS server sets it: `c.get('auth')` is
 * `{user, scopes}`. Berth's public routes (`/ok`, `/info`, the docs) and `GET /ui/...` assets stay public.
 */
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Request as ExpressRequest, RequestHandler, Response as ExpressResponse } from 'express';
import { BerthError } from '@berth/errors';
import { DEPLOYMENT_CREDENTIAL_HEADER } from '@berth/http';
import type { Logger } from '@berth/log';
import { toFetchRequest, type AuthContext } from '../auth/index.js';
import { importProjectExport, type ProjectConfig } from '@berth/langgraph-project';

/** What `http.app` must export: anything with a Fetch API handler. */
export interface FetchApp {
  fetch(request: Request, ...rest: unknown[]): Response | Promise<Response>;
}

/** The parts of a Hono app the composition uses (from the user's own copy of hono). */
interface HonoLike extends FetchApp {
  use(handler: (c: { req: { raw: Request }; set(key: string, value: unknown): void }, next: () => Promise<void>) => Promise<void>): HonoLike;
  route(path: string, app: HonoLike): HonoLike;
  all(path: string, handler: () => Response): HonoLike;
}

/** The `http.app` module failed to import or does not export a fetch-style app. */
export class HttpAppLoadError extends BerthError {
  constructor(spec: string, problem: string, options?: { cause?: unknown }) {
    super('invalid_argument', `http.app "${spec}": ${problem}`, options);
  }
}

function isFetchApp(value: unknown): value is FetchApp {
  return typeof value === 'object' && value !== null && typeof (value as FetchApp).fetch === 'function';
}

function isHono(app: FetchApp): app is HonoLike {
  const candidate = app as Partial<HonoLike>;
  return (
    typeof candidate.use === 'function' && typeof candidate.route === 'function' && typeof candidate.all === 'function' && typeof app.constructor === 'function'
  );
}

/**
 * Imports the project's `http.app` module and returns its app, or undefined when there is none.
 * @throws HttpAppLoadError when the module fails to import, lacks the export, or the export has no `fetch`.
 */
export async function loadHttpApp(project: ProjectConfig): Promise<FetchApp | undefined> {
  if (!project.httpApp) return undefined;
  const { exportName } = project.httpApp;
  const spec = project.json.http?.app ?? `${project.httpApp.file}:${exportName}`;
  const exported = await importProjectExport(project.projectDir, project.httpApp, (problem, cause) => new HttpAppLoadError(spec, problem, { cause }));
  if (!isFetchApp(exported)) {
    throw new HttpAppLoadError(spec, `export "${exportName}" is not an app with a fetch(request) method (e.g. \`new Hono()\`)`);
  }
  return exported;
}

export interface CustomRoutesOptions {
  /** Authenticates a request with the project's custom auth (absent: no custom auth). */
  authenticate?: (req: ExpressRequest) => Promise<AuthContext | undefined>;
  /**
   * Whether Berth's own route at this method and path is served without the project's auth (its
   * declared access does not take `custom_auth`): so is the app's answer there.
   */
  skipsAuth: (method: string, path: string) => boolean;
  log: Logger;
}

/**
 * Express middleware serving the project's app before the built-in routes (see the module comment).
 * A request the app leaves to Berth goes on with `next()`, carrying the headers the app's middleware set.
 */
export function customRoutes(app: FetchApp, options: CustomRoutesOptions): RequestHandler {
  // Marks the answer of the catch-all route; random so that no user response can fake it.
  const passHeader = `x-berth-builtin-${randomUUID()}`;
  let fetchApp: FetchApp = app;
  // The authenticated user of each request the app is given, for its `c.get('auth')`.
  const authOf = new WeakMap<Request, AuthContext>();
  if (isHono(app)) {
    const Outer = app.constructor as new () => HonoLike;
    const outer = new Outer();
    outer.use(async (c, next) => {
      const auth = authOf.get(c.req.raw);
      if (auth) c.set('auth', { user: auth.user, scopes: auth.permissions });
      await next();
    });
    outer.route('/', app);
    outer.all('*', () => new Response(null, { status: 200, headers: { [passHeader]: '1' } }));
    fetchApp = outer;
  }

  return (req, res, next) => {
    void (async () => {
      const path = req.path;
      const isPublic = options.skipsAuth(req.method, path);
      const auth = options.authenticate && !isPublic ? await options.authenticate(req) : undefined;
      const request = await withBody(req);
      if (auth) authOf.set(request, auth);
      const response = await fetchApp.fetch(request);
      if (response.headers.get(passHeader) === '1') {
        copyHeaders(response, res, passHeader);
        next();
        return;
      }
      if (fetchApp === app && response.status === 404) {
        next();
        return;
      }
      await sendResponse(response, res);
    })().catch((error: unknown) => {
      if (res.headersSent) {
        options.log.error({ err: error, path: req.path }, 'http.app response failed midway');
        res.destroy(error instanceof Error ? error : undefined);
        return;
      }
      next(error);
    });
  };
}

/** The express request as a Fetch API request, body included (JSON as express parsed it). */
async function withBody(req: ExpressRequest): Promise<Request> {
  const base = toFetchRequest(req);
  if (req.method === 'GET' || req.method === 'HEAD') return base;
  const headers = new Headers(base.headers);
  let body: Buffer | string;
  if (req.body !== undefined) {
    // express.json consumed the stream (express 5 leaves req.body undefined otherwise): its
    // result is sent again, so the length may differ.
    body = JSON.stringify(req.body);
    headers.delete('content-length');
  } else {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    body = Buffer.concat(chunks);
  }
  headers.delete('transfer-encoding');
  return new Request(base.url, { method: base.method, headers, body });
}

function copyHeaders(from: Response, to: ExpressResponse, skip?: string): void {
  for (const [name, value] of from.headers) {
    if (name === skip || name === 'set-cookie' || name === 'content-length') continue;
    to.setHeader(name, value);
  }
  const cookies = from.headers.getSetCookie();
  if (cookies.length > 0) to.setHeader('set-cookie', cookies);
}

/** Writes a Fetch API response to express, streaming its body chunk by chunk as it comes. */
async function sendResponse(response: Response, res: ExpressResponse): Promise<void> {
  res.status(response.status);
  if (response.statusText) res.statusMessage = response.statusText;
  copyHeaders(response, res);
  const length = response.headers.get('content-length');
  if (length !== null) res.setHeader('content-length', length);
  if (!response.body) {
    res.end();
    return;
  }
  res.flushHeaders();
  await pipeline(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream), res);
}

/**
 * Points `new Client()` of `@langchain/langgraph-sdk` without an `apiUrl` (in graph code or in
 * the http.app's routes) at this server, through the globals the SDK reads for that, as under the
 * LangGraph JS server. With a deployment credential, those requests carry it.
 */
export function bindLoopbackClient(serverUrl: string, deploymentCredential?: string): void {
  const url = new URL(serverUrl);
  // A wildcard listen address is not one to connect to.
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = '127.0.0.1';
  const base = url.origin;
  const slots = globalThis as Record<symbol, unknown>;
  slots[Symbol.for('langgraph_api:url')] = base;
  if (deploymentCredential) {
    slots[Symbol.for('langgraph_api:fetch')] = (input: string | URL | Request, init?: RequestInit) => {
      const target = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
      if (!target.startsWith(`${base}/`)) return fetch(input, init);
      const headers = new Headers(init?.headers);
      headers.set(DEPLOYMENT_CREDENTIAL_HEADER, deploymentCredential);
      return fetch(input, { ...init, headers });
    };
  }
}
