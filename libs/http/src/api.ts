/**
 * A route registry: each route declares its zod schemas once; they validate the request (strict,
 * 422 on any bad or unknown field), shape the response, and generate the OpenAPI document.
 */
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { hasCredentialHeader, hasUnreadBody, readBodyAsJson } from './json-body.js';
import { RouteTable } from './route-table.js';
import { parseRequestPart } from './validation.js';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * Who may call a route: anyone (`'public'`), or a caller presenting one of these kinds of credential,
 * as the Api's `authenticate` names them (the gateway: a tenant's API key, a bearer token, a
 * deployment's tracing credential). Every route says it; a route without it fails at registration.
 */
export type Access<K extends string = string> = 'public' | readonly [K, ...K[]];

export interface HandlerInput<P, Q, B, Ctx> {
  params: P;
  query: Q;
  body: B;
  /** What the Api's `authenticate` returned; `undefined` on public routes. */
  auth: Ctx;
  req: Request;
  res: Response;
}

export interface RouteSpec<
  Ctx = unknown,
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
  R extends z.ZodType = z.ZodType,
  K extends string = string,
> {
  method: HttpMethod;
  /**
   * OpenAPI-style path, written out in full as one string literal (so a URL from a log finds it with
   * grep; lint rule berth-routes/literal-route-paths), e.g. `/v1/tenants/{tenant_id}`.
   */
  path: string;
  /** Who may call it: `'public'` (no authentication), or the credentials `authenticate` must accept. */
  access: Access<K>;
  summary: string;
  description?: string;
  tags?: string[];
  operationId?: string;
  params?: P;
  query?: Q;
  body?: B;
  /** Success status. @default 200 (204 when there is no response schema) */
  status?: number;
  /** Response body schema (`z.object`, which strips): the handler's value is parsed with it, so nothing undeclared leaks. */
  response?: R;
  /**
   * The route answers with server-sent events that its handler writes (e.g. with `SseWriter`);
   * says what they are. Documented as 200 `text/event-stream`; with a `response` too, the route
   * answers either (the handler picks by the request, e.g. a `follow` parameter) and both are documented.
   */
  events?: string;
  /**
   * Media types of a body the handler writes itself (HTML, scripts, files), e.g. `['text/html']`.
   * Documented as strings of those types; not combined with `response` or `events`.
   */
  produces?: string[];
  /**
   * Media types of a body the handler reads itself from the request stream (a tarball, multipart),
   * e.g. `['multipart/form-data']`. Other routes take JSON: a body of another or no type is read as
   * JSON from a credentialed request and refused with 415 otherwise (ApiOptions.credentialed).
   */
  consumes?: string[];
  /** Other success statuses the handler may set itself, without a body, and when, e.g. `{ 204: 'with wait=true' }`. */
  otherStatuses?: Record<number, string>;
  /** Error statuses worth documenting besides 401/403/422, e.g. `[404, 409]`. */
  errors?: number[];
  handler(input: HandlerInput<z.output<P>, z.output<Q>, z.output<B>, Ctx>): Promise<z.input<R> | void> | z.input<R> | void;
}

export interface ApiOptions<Ctx, K extends string = string> {
  /**
   * Runs before every non-public route, given the kinds of credential the route takes (its `access`);
   * throw an UnauthenticatedError/PermissionDeniedError to refuse. Without it, only public routes
   * can be registered.
   */
  authenticate?: (req: Request, accepts: readonly K[]) => Promise<Ctx>;
  /**
   * Whether a route taking these credentials is documented as authenticated (security schemes, 401/403).
   * @default every non-public route
   */
  documentedAuth?: (accepts: readonly K[]) => boolean;
  /**
   * The request carries a credential a cross-site page cannot send without a CORS preflight: only
   * then is a body of another or no content type read as JSON (else 415).
   * @default hasCredentialHeader (an `x-api-key` or `authorization` header)
   */
  credentialed?: (req: Request) => boolean;
}

/** A route as the Api keeps it. */
type Registered<Ctx, K extends string> = RouteSpec<Ctx, z.ZodType, z.ZodType, z.ZodType, z.ZodType, K>;

/** Top-level request schemas must reject unknown keys; a non-strict object is a programming error. */
function assertStrict(schema: z.ZodType | undefined, where: string): void {
  if (schema instanceof z.ZodObject && !(schema.def.catchall instanceof z.ZodNever)) {
    throw new Error(`${where} must be a strict object schema (z.strictObject) so unknown fields are refused`);
  }
}

/** The schema of a part a route does not declare: only the checks every part gets apply. */
const anything = z.unknown();

export class Api<Ctx = undefined, K extends string = string> {
  private readonly specs: Registered<Ctx, K>[] = [];
  private table: RouteTable<Registered<Ctx, K>> | undefined;

  constructor(private readonly options: ApiOptions<Ctx, K> = {}) {}

  get routes(): readonly Registered<Ctx, K>[] {
    return this.specs;
  }

  /** Whether the OpenAPI document shows the route as authenticated (see ApiOptions.documentedAuth). */
  documentsAuth(spec: Registered<Ctx, K>): boolean {
    if (spec.access === 'public') return false;
    return this.options.documentedAuth?.(spec.access) ?? true;
  }

  /** The route serving a request's method and path (without the query), if one does. */
  match(method: string, path: string): Registered<Ctx, K> | undefined {
    const found = this.routeTable().match(method, path);
    return found.kind === 'found' ? found.value : undefined;
  }

  route<P extends z.ZodType = z.ZodObject<{}>, Q extends z.ZodType = z.ZodObject<{}>, B extends z.ZodType = z.ZodUndefined, R extends z.ZodType = z.ZodVoid>(
    spec: RouteSpec<Ctx, P, Q, B, R, K>,
  ): this {
    const where = `${spec.method.toUpperCase()} ${spec.path}`;
    const access = spec.access as Access<K> | undefined;
    if (access !== 'public' && !(Array.isArray(access) && access.length > 0)) {
      throw new Error(`${where}: say who may call it (access: 'public', or the kinds of credential it takes)`);
    }
    if (access !== 'public' && !this.options.authenticate) throw new Error(`${where}: takes credentials, but this Api authenticates nobody`);
    assertStrict(spec.query, `${where} query`);
    assertStrict(spec.body, `${where} body`);
    this.specs.push(spec as unknown as Registered<Ctx, K>);
    this.table = undefined;
    return this;
  }

  private routeTable(): RouteTable<Registered<Ctx, K>> {
    if (!this.table) {
      this.table = new RouteTable();
      for (const spec of this.specs) this.table.add(spec.method.toUpperCase(), spec.path, spec);
    }
    return this.table;
  }

  /** A request handler serving every registered route (405 for a known path with another method). */
  router(): RequestHandler {
    const table = this.routeTable();
    return (req, res, next) => {
      const url = req.url;
      const query = url.indexOf('?');
      const found = table.match(req.method, query < 0 ? url : url.slice(0, query));
      if (found.kind === 'none') return next();
      if (found.kind === 'method') {
        res.setHeader('Allow', found.allow.join(', '));
        res.status(405).json({ detail: 'Method Not Allowed' });
        return;
      }
      this.handle(found.value, found.params, req, res).catch(next);
    };
  }

  private async handle(spec: Registered<Ctx, K>, pathParams: Record<string, string>, req: Request, res: Response): Promise<void> {
    req.params = pathParams;
    req.routeTemplate = spec.path;
    // Before authentication: a refused body is refused whoever sends it, and is never left unread.
    if (!spec.consumes && hasUnreadBody(req)) await readBodyAsJson(req, res, (this.options.credentialed ?? hasCredentialHeader)(req));
    const auth = spec.access === 'public' ? (undefined as Ctx) : await this.options.authenticate!(req, spec.access);
    // Parts without a schema are still read by handlers (req.params, req.query): they are checked too.
    const params = parseRequestPart('path', spec.params ?? anything, pathParams);
    const query = parseRequestPart('query', spec.query ?? anything, { ...(req.query as object) });
    let body: unknown;
    if (spec.body) {
      // A request without a body counts as `{}` when the schema accepts that (all fields optional).
      const raw = req.body === undefined && spec.body.safeParse({}).success ? {} : req.body;
      body = parseRequestPart('body', spec.body, raw);
    }
    const result = await spec.handler({ params, query, body, auth, req, res });
    if (res.headersSent || res.writableEnded) return;
    // A handler may pick another status itself (e.g. 503 from a readiness check, 202 for work accepted).
    const chosen = res.statusCode !== 200 ? res.statusCode : undefined;
    if (!spec.response) {
      res.status(chosen ?? spec.status ?? 204).end();
      return;
    }
    res.status(chosen ?? spec.status ?? 200).json(spec.response.parse(result));
  }
}
