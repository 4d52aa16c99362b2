/**
 * The deployment URL: `ALL /d/{deployment_id}/…` is proxied to the agent server of the
 * deployment's serving revision, so `Client({ apiUrl: deployment_url, apiKey })` of the LangGraph
 * SDKs talks to it as to any agent server.
 *
 * - Streaming both ways: request bodies are piped up, responses piped down chunk by chunk (SSE
 *   events from `/runs/stream` arrive as the agent server writes them); nothing is buffered.
 * - A client that hangs up aborts the upstream request (the agent server sees its stream end).
 * - Hop-by-hop headers (RFC 9110 §7.6.1, and whatever `Connection` names) are not forwarded.
 * - Auth: unless the project has its own auth handler (`custom_auth`), the request must carry an
 *   API key or bearer token of the deployment's tenant, or a console session of it (the console's
 *   Studio; from the gateway's own pages only, with X-CSRF-Token on unsafe methods, never on a
 *   WebSocket); another tenant's credential gets the same
 *   404 as an unknown deployment, and the platform credential is not passed on to the project.
 *   Credentials are checked before anything about the id is told, so without valid ones an
 *   unknown, malformed or existing id gets the same 401. With `custom_auth` every header passes
 *   untouched but the session cookie: the project's handler decides (and so such a deployment's
 *   existence shows); a console session counts for nothing there.
 * - The agent server answers only the gateway: every forwarded request carries the serving
 *   revision's credential (`x-berth-deployment-credential`). A client can neither send that
 *   header (it is dropped) nor see it (it is dropped from answers too).
 * - CORS: a preflight (OPTIONS with Origin and Access-Control-Request-Method; browsers never send
 *   credentials on one) needs none. It is answered by the deployment's agent server, per its
 *   `http.cors`, and nothing else reaches it: a bodiless OPTIONS carrying only Origin and the
 *   Access-Control-Request-* headers (and the gateway's own), without the query. When no agent
 *   server can answer — an unknown, malformed or other tenant's id, none serving yet, one down —
 *   the gateway answers as a deployment without `http.cors` does (any origin, no credentials), so a
 *   preflight tells no more about a deployment than its CORS answer. Other answers carry the agent
 *   server's Access-Control-* headers untouched; the gateway's own (below) allow any origin to read
 *   them, without credentials, so a page can show why a call failed.
 * - The console's origin is the gateway's, and so is a deployment URL's: a page an agent server
 *   serves (a custom route) would be same-origin with the console and could use its session. So the
 *   console session cookie is never passed on nor accepted from an agent server (`admit`,
 *   `answerHeaders`), and every answer carries `Content-Security-Policy: sandbox …` without
 *   `allow-same-origin`: a document from a deployment URL runs in an opaque origin of its own,
 *   whose requests to the gateway carry no session cookie and no same-origin `Origin`.
 * - Answers of its own are JSON `{"detail": …}`: 401 (no or bad credential), 404 (unknown or
 *   deleted deployment, or a malformed id), 502 (the agent server's answer is malformed), 503 with
 *   Retry-After (no revision serves yet, or its agent server is down or restarting), 503 without
 *   Retry-After (status FAILED: the latest revision failed and none serves, so waiting will not
 *   help — the deployment exists, so not a 404, and it answers again without a new URL once a
 *   fixed revision deploys).
 */
import { randomUUID } from 'node:crypto';
import http, { type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { CorsPolicy, DEPLOYMENT_CREDENTIAL_HEADER, httpErrorBody, isPreflight } from '@berth/http';
import type { Logger } from '@berth/log';
import { observeHttpRequest, secondsSince } from '@berth/metrics';
import { DeploymentStatus } from '@berth/proto';
import type { RequestHandler } from 'express';
import { publicOrigin } from '../public-url.js';
import { isUuid } from '@berth/ids';
import type { DeploymentResolver, ResolvedDeployment } from './resolver.js';
import { PROXY_CREDENTIALS, type GatewayCredential } from '../access.js';
import { SESSION_COOKIE, withoutCookie, withoutSetCookie } from '../cookies.js';
import { CSRF_HEADER, type AuthRequest, type GatewayAuthenticator } from '../trace-auth.js';

export interface DeploymentProxyDeps {
  resolver: DeploymentResolver;
  /** Refuses a deployment's tracing credential (403): it may call the trace API only. */
  auth: GatewayAuthenticator;
  logger: Logger;
  /** Told to agent servers as X-Forwarded-Host/-Proto; see GatewayConfig.publicUrl. */
  publicUrl?: string;
}

/** Seconds a client is asked to wait while an agent server is (re)starting. */
const RETRY_AFTER_SECONDS = '5';

/** A deployment without `http.cors`: any origin, no credentials (the LangGraph servers' default). */
const NO_HTTP_CORS = new CorsPolicy();

/** `/d/{id}` with an optional rest of path and query. */
export const PROXY_PATH = /^\/d\/([^/?#]*)([/?].*)?$/;
/** The route label of proxied requests: one series per method and status, whatever the deployment and path. */
const PROXY_ROUTE = '/d/{deployment_id}/{path}';

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** The platform's credentials: for the gateway, never for the project. */
const PLATFORM_CREDENTIALS = ['x-api-key', 'authorization', 'x-tenant-id'];

/** The headers of a message minus hop-by-hop ones, including those its Connection header lists. */
export function endToEndHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const listed = new Set(
    String(headers.connection ?? '')
      .split(',')
      .map((token) => token.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed.has(name)) continue;
    out[name] = value;
  }
  return out;
}

function sendJson(res: ServerResponse, status: number, detail: unknown, extra: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ detail });
  NO_HTTP_CORS.apply(res.req, res);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body), ...extra });
  res.end(body);
}

/** Pages of deployments run scripts, forms and popups, but never as the gateway's (the console's) origin. */
export const DEPLOYMENT_PAGE_CSP = 'sandbox allow-downloads allow-forms allow-modals allow-popups allow-scripts';

/**
 * An agent server's answer headers as the client gets them: end-to-end ones, never the deployment's
 * credential, never a console session cookie (a deployment may not sign a browser in), and the
 * sandbox that keeps its pages out of the gateway's origin (added to any policy of its own).
 */
export function answerHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out = endToEndHeaders(headers);
  delete out[DEPLOYMENT_CREDENTIAL_HEADER];
  const cookies = withoutSetCookie(out['set-cookie'], SESSION_COOKIE);
  if (cookies) out['set-cookie'] = cookies;
  else delete out['set-cookie'];
  const policies = out['content-security-policy'];
  out['content-security-policy'] = [...(policies === undefined ? [] : Array.isArray(policies) ? policies : [policies]), DEPLOYMENT_PAGE_CSP];
  return out;
}

/** Where a request for a deployment goes (the headers to send), or the answer refusing it. */
export type Admission =
  | { ok: true; target: ResolvedDeployment; headers: Record<string, string | string[]> }
  | { ok: false; status: number; detail: string; headers: Record<string, string> };

const refuse = (status: number, detail: string, headers: Record<string, string> = {}): Admission => ({ ok: false, status, detail, headers });
const unavailable = (detail: string) => refuse(503, detail, { 'retry-after': RETRY_AFTER_SECONDS });

/**
 * The checks every proxied request and WebSocket passes: the deployment, the caller's credential
 * (unless the project authenticates itself), and whether anything serves. Throws the credential's
 * 401/403; the other refusals are returned.
 */
export async function admit(
  deps: DeploymentProxyDeps,
  req: AuthRequest & { headers: IncomingHttpHeaders },
  rawId: string,
  credentials: readonly GatewayCredential[] = PROXY_CREDENTIALS,
): Promise<Admission> {
  const id = rawId.toLowerCase();
  const target = isUuid(id) ? await deps.resolver.resolve(id) : undefined;
  const headers = endToEndHeaders(req.headers);
  delete headers[DEPLOYMENT_CREDENTIAL_HEADER];
  // The console session is the gateway's, whoever authenticates: no agent server ever sees it.
  const cookie = withoutCookie(headers.cookie, SESSION_COOKIE);
  if (cookie) headers.cookie = cookie;
  else delete headers.cookie;
  if (!target?.customAuth) {
    // Throws the same 401 for a missing or bad credential whatever the id names.
    const principal = await deps.auth.authenticate(req, credentials);
    // Another tenant's key learns nothing, not even that the deployment exists.
    if (!target || principal.tenantId !== target.tenantId) return refuse(404, `Deployment ID ${isUuid(id) ? id : rawId} not found.`);
    for (const name of PLATFORM_CREDENTIALS) delete headers[name];
    // The session's CSRF token is the gateway's too: an agent server has no use for it.
    if (principal.credential.type === 'session') delete headers[CSRF_HEADER];
  }
  // Reasons are for the deployment's tenant; a custom-auth project's callers may be anyone.
  const why = target.customAuth ? '' : target.statusMessage;
  if (target.status === DeploymentStatus.UNHEALTHY) {
    return unavailable(`The agent server of deployment ${id} is restarting${why ? ` (${why})` : ''}; retry shortly`);
  }
  if (!target.upstreamUrl) {
    if (target.status === DeploymentStatus.FAILED) {
      return refuse(
        503,
        `Deployment ${id} cannot answer: ${why || 'its latest revision failed and no revision serves'}. Deploy a fixed revision to bring it up.`,
      );
    }
    return unavailable(`Deployment ${id} has no revision serving yet: wait until its latest revision is DEPLOYED`);
  }
  if (target.upstreamCredential) headers[DEPLOYMENT_CREDENTIAL_HEADER] = target.upstreamCredential;
  return { ok: true, target, headers };
}

/** A request id: the caller's X-Request-Id when sane, else a new one. */
export function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && /^[A-Za-z0-9._:-]{1,128}$/.test(given) ? given : randomUUID();
}

export function deploymentProxy(deps: DeploymentProxyDeps): RequestHandler {
  return (req, res, next) => {
    const match = PROXY_PATH.exec(req.url);
    if (!match) {
      next();
      return;
    }
    // On the gateway's own answers too: they look like the agent server's (see answerHeaders).
    res.setHeader('content-security-policy', DEPLOYMENT_PAGE_CSP);
    proxy(deps, req, res, match[1]!, match[2] ?? '').catch((error: unknown) => {
      const { status, body, headers } = httpErrorBody(error);
      if (status >= 500) deps.logger.error({ err: error, method: req.method, deploymentId: match[1] }, 'proxying failed');
      sendJson(res, status, body.detail, headers);
    });
  };
}

async function proxy(deps: DeploymentProxyDeps, req: IncomingMessage, res: ServerResponse, rawId: string, rest: string): Promise<void> {
  const started = performance.now();
  const requestId = requestIdOf(req);
  res.setHeader('X-Request-Id', requestId);
  const id = rawId.toLowerCase();
  const path = rest.startsWith('/') ? rest : `/${rest}`;
  res.once('close', () => {
    const status = res.statusCode;
    observeHttpRequest({ method: req.method ?? 'GET', route: PROXY_ROUTE, status, seconds: secondsSince(started) });
    const level = status >= 500 ? 'error' : status >= 400 || !res.writableFinished ? 'warn' : 'info';
    // The path only: queries of agent-server calls may carry user data.
    deps.logger[level](
      {
        req: { id: requestId, method: req.method, url: `/d/${id}${path.split('?')[0]}` },
        res: { statusCode: status },
        responseTime: Math.round(performance.now() - started),
      },
      res.writableFinished ? 'proxied request completed' : 'proxied request aborted',
    );
  });
  if (isPreflight(req)) return preflight(deps, req, res, id, path, requestId);
  const admission = await admit(deps, req, rawId);
  if (!admission.ok) return sendJson(res, admission.status, admission.detail, admission.headers);
  forward(deps, req, res, id, admission.target.upstreamUrl, path, admission.headers, requestId);
}

/** Has the deployment's agent server answer a preflight, else answers as one without `http.cors` does. */
async function preflight(deps: DeploymentProxyDeps, req: IncomingMessage, res: ServerResponse, id: string, path: string, requestId: string): Promise<void> {
  let target: ResolvedDeployment | undefined;
  try {
    target = isUuid(id) ? await deps.resolver.resolve(id) : undefined;
  } catch (error) {
    deps.logger.warn({ err: error, deploymentId: id }, 'could not resolve a deployment for a CORS preflight');
  }
  const standIn = () => NO_HTTP_CORS.answerPreflight(req, res);
  if (!target?.upstreamUrl || target.status === DeploymentStatus.UNHEALTHY) return standIn();
  // What a preflight is, and nothing else: no body, no cookies, no other header, no query.
  const headers: Record<string, string> = {};
  for (const name of ['origin', 'access-control-request-method', 'access-control-request-headers', 'access-control-request-private-network']) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  if (target.upstreamCredential) headers[DEPLOYMENT_CREDENTIAL_HEADER] = target.upstreamCredential;
  forward(deps, req, res, id, target.upstreamUrl, path.split('?')[0]!, headers, requestId, standIn);
}

function forward(
  deps: DeploymentProxyDeps,
  req: IncomingMessage,
  res: ServerResponse,
  id: string,
  upstreamUrl: string,
  path: string,
  headers: Record<string, string | string[]>,
  requestId: string,
  /** A preflight: no body goes up, and this answers when the agent server cannot. */
  preflightStandIn?: () => void,
): void {
  const upstream = upstreamRequest(deps, req, req.method ?? 'GET', id, upstreamUrl, path, headers, requestId);

  let clientGone = false;
  res.once('close', () => {
    if (!res.writableFinished) {
      clientGone = true;
      upstream.destroy();
    }
  });
  upstream.once('response', (answer) => {
    answer.once('error', () => res.destroy());
    answer.once('aborted', () => res.destroy());
    res.writeHead(answer.statusCode ?? 502, answer.statusMessage, answerHeaders(answer.headers));
    // Headers go out now, before the first body chunk: a stream's client sees it open at once.
    res.flushHeaders();
    answer.pipe(res);
  });
  upstream.once('error', (error: NodeJS.ErrnoException) => {
    if (clientGone) return;
    if (res.headersSent) {
      // Mid-response: the only honest signal left is to cut the connection.
      res.destroy(error);
      return;
    }
    deps.logger.warn({ err: error, deploymentId: id, upstream: upstreamUrl }, 'agent server unreachable');
    if (preflightStandIn) return preflightStandIn();
    // An answer that is not HTTP is a bad gateway; anything else (refused, reset, hang-up before
    // answering) means the agent server is down or restarting: worth a retry.
    if (error.code?.startsWith('HPE_')) sendJson(res, 502, `The agent server of deployment ${id} sent a malformed answer`);
    else sendJson(res, 503, `The agent server of deployment ${id} is restarting; retry shortly`, { 'retry-after': RETRY_AFTER_SECONDS });
  });
  req.once('aborted', () => upstream.destroy());
  if (preflightStandIn) upstream.end();
  else req.pipe(upstream);
}

/** The request to the agent server, with the gateway's forwarding headers (X-Forwarded-*, X-Request-Id). */
export function upstreamRequest(
  deps: Pick<DeploymentProxyDeps, 'publicUrl'>,
  req: IncomingMessage,
  method: string,
  id: string,
  upstreamUrl: string,
  path: string,
  headers: Record<string, string | string[]>,
  requestId: string,
): http.ClientRequest {
  const base = new URL(upstreamUrl);
  const prior = req.headers['x-forwarded-for'];
  const client = req.socket.remoteAddress ?? '';
  // Where the client reached the platform, for URLs the agent server builds: never the client's own Host.
  const origin = new URL(publicOrigin(req, deps.publicUrl));
  const upstreamHeaders = {
    ...headers,
    host: base.host,
    'x-forwarded-for': prior ? `${String(prior)}, ${client}` : client,
    'x-forwarded-host': origin.host,
    'x-forwarded-proto': origin.protocol.slice(0, -1),
    'x-forwarded-prefix': `${origin.pathname.replace(/\/+$/, '')}/d/${id}`,
    'x-request-id': requestId,
  };
  const transport = base.protocol === 'https:' ? https : http;
  // Node's global agents keep connections alive (Node ≥ 19), so calls reuse upstream sockets.
  return transport.request({
    protocol: base.protocol,
    hostname: base.hostname,
    port: base.port,
    method,
    path: `${base.pathname.replace(/\/+$/, '')}${path}`,
    headers: upstreamHeaders,
  });
}
