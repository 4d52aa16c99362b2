/**
 * CORS as `langgraph.json`'s `http.cors` describes it (the fields of the LangGraph servers), used by
 * agent servers for their deployments and by the gateway for its own API. Without `allow_origins`
 * every origin is allowed, as the LangGraph servers do. `Access-Control-Allow-Credentials` never
 * goes with a wildcard: with credentials allowed, the allowed origin is echoed (with
 * `Vary: Origin`). A preflight is answered here, before any route, authentication or body parsing.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';

export interface CorsOptions {
  /** Origins allowed (`*`: any). @default ['*'] */
  allow_origins?: string[];
  /** Origins allowed besides `allow_origins`: a regular expression the whole origin must match. */
  allow_origin_regex?: string;
  /** @default ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] (`*` means these too) */
  allow_methods?: string[];
  /** Request headers allowed. @default whatever the preflight asks for (as `*` does) */
  allow_headers?: string[];
  /** Browsers may send cookies and read the answer. @default false */
  allow_credentials?: boolean;
  /** Added to the headers the SDK reads (Location, Content-Location, X-Pagination-*). */
  expose_headers?: string[];
  /** Seconds a browser may reuse a preflight's answer. @default the browser's own (5 s in Chromium) */
  max_age?: number;
}

const DEFAULT_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const SDK_HEADERS = ['content-location', 'location', 'x-pagination-total', 'x-pagination-next'];

/** An OPTIONS request a browser sends before a non-simple one (never with credentials). */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && typeof req.headers.origin === 'string' && req.headers['access-control-request-method'] !== undefined;
}

export class CorsPolicy {
  private readonly anyOrigin: boolean;
  private readonly origins: Set<string>;
  private readonly pattern: RegExp | undefined;
  private readonly methods: string;
  private readonly expose: string;

  constructor(private readonly options: CorsOptions = {}) {
    const origins = options.allow_origins ?? ['*'];
    this.anyOrigin = origins.includes('*');
    this.origins = new Set(origins);
    this.pattern = options.allow_origin_regex === undefined ? undefined : new RegExp(`^(?:${options.allow_origin_regex})$`);
    const methods = options.allow_methods ?? DEFAULT_METHODS;
    this.methods = (methods.includes('*') ? DEFAULT_METHODS : methods).join(', ');
    this.expose = [...new Set([...SDK_HEADERS, ...(options.expose_headers ?? [])])].join(', ');
  }

  /** Whether a page of `origin` may call. */
  allows(origin: string): boolean {
    return this.anyOrigin || this.origins.has(origin) || (this.pattern?.test(origin) ?? false);
  }

  /**
   * Sets the headers answering `req` (an actual request or a preflight); returns whether the origin
   * is allowed. The answer depends on Origin unless it is a plain `*`: then caches are told so.
   */
  apply(req: IncomingMessage, res: ServerResponse): boolean {
    const credentials = this.options.allow_credentials === true;
    if (!(this.anyOrigin && !credentials)) varyByOrigin(res);
    const origin = req.headers.origin;
    if (typeof origin !== 'string' || !this.allows(origin)) return false;
    res.setHeader('Access-Control-Allow-Origin', this.anyOrigin && !credentials ? '*' : origin);
    if (credentials) res.setHeader('Access-Control-Allow-Credentials', 'true');
    if (!isPreflight(req)) {
      res.setHeader('Access-Control-Expose-Headers', this.expose);
      return true;
    }
    res.setHeader('Access-Control-Allow-Methods', this.methods);
    const requested = req.headers['access-control-request-headers'];
    const listed = this.options.allow_headers;
    const headers = listed && !listed.includes('*') ? listed.join(', ') : requested;
    if (headers) res.setHeader('Access-Control-Allow-Headers', headers);
    if (this.options.max_age !== undefined) res.setHeader('Access-Control-Max-Age', String(this.options.max_age));
    return true;
  }

  /** Answers a preflight (204, with the headers when the origin is allowed). */
  answerPreflight(req: IncomingMessage, res: ServerResponse): void {
    this.apply(req, res);
    res.statusCode = 204;
    res.end();
  }
}

function varyByOrigin(res: ServerResponse): void {
  const vary = res.getHeader('vary');
  const listed = String(vary ?? '')
    .split(',')
    .map((v) => v.trim().toLowerCase());
  if (!listed.includes('origin') && !listed.includes('*')) res.setHeader('Vary', vary ? `${String(vary)}, Origin` : 'Origin');
}

/**
 * Middleware: answers preflights and adds the headers to every other answer. `options` may be
 * computed per request (the gateway always allows the origin it is reached at).
 */
export function cors(options: CorsOptions | ((req: Request) => CorsPolicy) = {}): RequestHandler {
  const fixed = typeof options === 'function' ? undefined : new CorsPolicy(options);
  return (req, res, next) => {
    const policy = fixed ?? (options as (req: Request) => CorsPolicy)(req);
    if (isPreflight(req)) return policy.answerPreflight(req, res);
    policy.apply(req, res);
    next();
  };
}
