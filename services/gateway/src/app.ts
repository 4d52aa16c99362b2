/**
 * The gateway's HTTP app: authentication in front of every non-public route, the platform's own
 * endpoints (tenants, API keys, tokens, health, login flows and their approval page), the
 * deployment API, the deployment URL proxy (`/d/{deployment_id}/…`), the OpenAPI document and
 * docs page, and the web console (console.ts).
 */
import { DEFAULT_SESSION_LIMITS, type AuthStore, type ConsoleSessions } from '@berth/auth';
import { systemClock } from '@berth/clock';
import { Api, CorsPolicy, cors, createApp, docsRouter, openApiDocument } from '@berth/http';
import type { Clock } from '@berth/clock';
import type { Logger } from '@berth/log';
import express, { type Express, type RequestHandler } from 'express';
import { declaredAccess, type GatewayApi } from './access.js';
import { consoleRoutes } from './console.js';
import { publicOrigin } from './public-url.js';
import type { ControlPlaneClients } from './control-plane.js';
import { ExportWorkerClients } from './export-worker.js';
import { deploymentProxy } from './proxy/deployment-proxy.js';
import { DeploymentSockets } from './proxy/deployment-sockets.js';
import { DeploymentResolver } from './proxy/resolver.js';
import { RateLimiter } from './rate-limit.js';
import { SandboxManagerClients } from './sandbox-manager.js';
import { GatewayAuthenticator } from './trace-auth.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { authFlowRoutes } from './routes/auth-flows.js';
import { consoleSessionRoutes } from './routes/console-session.js';
import { bulkExportRoutes } from './routes/bulk-exports/index.js';
import { uploadRequestBody, uploadRoutes } from './routes/deployment-upload.js';
import { deploymentStreamRoutes } from './routes/deployment-streams.js';
import { deploymentRoutes } from './routes/deployments.js';
import { loginPageRoutes } from './routes/login-page.js';
import { healthRoutes, type ReadinessCheck } from './routes/health.js';
import { meRoutes } from './routes/me.js';
import { ExecSockets, sandboxRoutes } from './routes/sandboxes/index.js';
import { tenantRoutes } from './routes/tenants.js';
import { traceJsonParser, traceRoutes } from './routes/traces/index.js';
import type { TraceLimits } from './routes/traces/runs.js';
import { BERTH_VERSION } from './version.js';

export interface GatewayAppDeps {
  logger: Logger;
  store: AuthStore;
  readiness: Record<string, ReadinessCheck>;
  /** Shown in /readyz without making it a 503 (see HealthRouteOptions.degradable). */
  degradableReadiness?: Record<string, ReadinessCheck>;
  controlPlane: ControlPlaneClients;
  /** The export-worker's clients; without them, the trace and bulk-export routes answer 503. */
  exportWorker?: ExportWorkerClients;
  /** The sandbox-manager's clients; without them, the sandbox routes answer 503. */
  sandboxManager?: SandboxManagerClients;
  /** Size limits of trace ingest (tests make them small). */
  traceLimits?: Partial<TraceLimits>;
  /** This start's id, answered by `/readyz` (see RunningGateway.instanceId). */
  instanceId?: string;
  /** See GatewayConfig.publicUrl. */
  publicUrl?: string;
  /** See ConsoleOptions.dir. */
  consoleDir?: string;
  /** See GatewayConfig.corsAllowOrigins. @default [] */
  corsAllowOrigins?: string[];
  /** @default 2592000 */
  loginTokenTtlSeconds?: number;
  /** @default 20 */
  loginRateLimit?: number;
  /** Reads of shared traces (`/api/v2/public/…`) per client address and minute. @default 120 */
  publicTraceReadRateLimit?: number;
  /**
   * Console sessions (see GatewayConfig.consoleSessions).
   * @default the store's, with DEFAULT_SESSION_LIMITS on the system clock
   */
  sessions?: ConsoleSessions;
  /**
   * How long the proxy reuses a deployment's routing (`ResolveDeployment`), in milliseconds: a
   * redeploy reaches clients within about this long.
   * @default 1000
   */
  resolveCacheMs?: number;
  /** See GatewayConfig.clock (also the deployment cache's). @default systemClock */
  clock?: Clock;
  /**
   * Largest project tarball `POST /v2/deployments/{id}/upload` takes, in bytes.
   * @default 209715200 (200 MB)
   */
  maxUploadBytes?: number;
}

export const securitySchemes = {
  ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'An API key of the tenant' },
  TenantId: { type: 'apiKey', in: 'header', name: 'X-Tenant-Id', description: 'Optional; must match the key’s tenant' },
  Bearer: { type: 'http', scheme: 'bearer', description: 'A token from POST /v1/auth/tokens' },
  ConsoleSession: {
    type: 'apiKey',
    in: 'cookie',
    name: 'berth_session',
    description: 'A console session from POST /v1/auth/session; POST, PUT, PATCH and DELETE also need its X-CSRF-Token header',
  },
};

/** Who requests are: the authenticator and what it consults, one set per app. */
interface GatewayAuth {
  resolver: DeploymentResolver;
  sessions: ConsoleSessions;
  auth: GatewayAuthenticator;
}

function gatewayAuth(deps: GatewayAppDeps): GatewayAuth {
  const resolver = deploymentResolver(deps);
  const sessions = deps.sessions ?? deps.store.consoleSessions(DEFAULT_SESSION_LIMITS, systemClock);
  const auth = new GatewayAuthenticator(deps.store, resolver, sessions, deps.publicUrl ? { publicUrl: deps.publicUrl } : {});
  return { resolver, sessions, auth };
}

export function gatewayApi(deps: GatewayAppDeps, { auth, sessions } = gatewayAuth(deps)): GatewayApi {
  const api: GatewayApi = new Api({ authenticate: (req, accepts) => auth.authenticate(req, accepts) });
  healthRoutes(api, {
    checks: deps.readiness,
    ...(deps.degradableReadiness ? { degradable: deps.degradableReadiness } : {}),
    unhealthyDeployments: async () => (await deps.controlPlane.deployments.getDeploymentsHealth({})).unhealthyDeployments,
    ...(deps.instanceId ? { instanceId: deps.instanceId } : {}),
  });
  meRoutes(api, deps.store);
  tenantRoutes(api, deps.store);
  apiKeyRoutes(api, deps.store);
  const perMinute = deps.loginRateLimit ?? 20;
  authFlowRoutes(api, {
    controlPlane: deps.controlPlane,
    loginLimiter: new RateLimiter({ limit: perMinute, what: 'login attempts' }),
    ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}),
  });
  consoleSessionRoutes(api, {
    store: deps.store,
    sessions,
    signInLimiter: new RateLimiter({ limit: perMinute, what: 'sign-in attempts' }),
    ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}),
  });
  loginPageRoutes(api, {
    store: deps.store,
    controlPlane: deps.controlPlane,
    approveLimiter: new RateLimiter({ limit: perMinute, what: 'approval attempts' }),
    tokenTtlSeconds: deps.loginTokenTtlSeconds ?? 30 * 24 * 3600,
    ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}),
  });
  deploymentRoutes(api, {
    controlPlane: deps.controlPlane,
    ...(deps.exportWorker ? { exportWorker: deps.exportWorker } : {}),
    ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}),
  });
  deploymentStreamRoutes(api, { controlPlane: deps.controlPlane, logger: deps.logger, ...(deps.clock ? { clock: deps.clock } : {}) });
  uploadRoutes(api, { controlPlane: deps.controlPlane, logger: deps.logger, ...(deps.maxUploadBytes ? { maxBytes: deps.maxUploadBytes } : {}) });
  traceRoutes(api, {
    exportWorker: deps.exportWorker ?? new ExportWorkerClients(undefined),
    logger: deps.logger,
    ...(deps.traceLimits ? { limits: deps.traceLimits } : {}),
    ...(deps.clock ? { clock: deps.clock } : {}),
    publicLimiter: new RateLimiter({ limit: deps.publicTraceReadRateLimit ?? 120, what: 'reads of shared traces' }),
  });
  bulkExportRoutes(api, { exportWorker: deps.exportWorker ?? new ExportWorkerClients(undefined) });
  sandboxRoutes(api, { manager: deps.sandboxManager ?? new SandboxManagerClients(undefined), ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}) });
  consoleRoutes(api, deps.consoleDir ? { dir: deps.consoleDir } : {});
  return api;
}

/** Where deployments' traffic goes and their tracing credentials, from the control plane (cached briefly). */
function deploymentResolver(deps: GatewayAppDeps): DeploymentResolver {
  return new DeploymentResolver(
    async (deploymentId) => {
      const { tenantId, upstreamUrl, customAuth, upstreamCredential, status, statusMessage, tracingCredential, name, sessionId } =
        await deps.controlPlane.deployments.resolveDeployment({ deploymentId }, { timeoutMs: 10_000 });
      return { tenantId, upstreamUrl, customAuth, upstreamCredential, status, statusMessage, tracingCredential, name, sessionId };
    },
    { ttlMs: deps.resolveCacheMs ?? 1000, ...(deps.clock ? { clock: deps.clock } : {}) },
  );
}

/**
 * The OpenAPI document `/openapi.json` serves: the routes of `api` (see {@link gatewayApi}), the raw
 * upload body and the deployment proxy. docs/reference/rest.md is generated from it (cli/src/docs).
 */
export function gatewayOpenApiDocument(api: GatewayApi): Record<string, unknown> {
  const doc = openApiDocument([api as never], {
    title: 'Berth',
    version: BERTH_VERSION,
    description:
      'The Berth platform API: tenants, API keys and tokens; deployments and their revisions, logs and uploads. ' +
      'A deployment answers at its `deployment_url` (`/d/{deployment_id}/…`), proxied to its agent server.',
    securitySchemes,
  });
  // The route registry describes JSON bodies; the upload takes the raw tarball.
  const paths = doc.paths as Record<string, Record<string, Record<string, unknown>>>;
  const upload = paths['/v2/deployments/{deployment_id}/upload']?.post;
  if (upload) upload.requestBody = uploadRequestBody;
  paths['/d/{deployment_id}/{path}'] = proxyOperations();
  return doc;
}

/** The gateway's HTTP handling: the app, and the WebSocket endpoints its server's `upgrade` events go to. */
export interface GatewayHttp {
  app: Express;
  /** The sandboxes' streaming exec; close it before the server (its sockets get 1001). */
  sockets: ExecSockets;
  /** WebSockets on deployment URLs, tunnelled to agent servers; close it before the server. */
  deploymentSockets: DeploymentSockets;
}

export function createGatewayApp(deps: GatewayAppDeps): Express {
  return createGatewayHttp(deps).app;
}

export function createGatewayHttp(given: GatewayAppDeps): GatewayHttp {
  // One set of sandbox-manager clients for the routes and the WebSocket endpoint.
  const deps = { ...given, sandboxManager: given.sandboxManager ?? new SandboxManagerClients(undefined) };
  const parts = gatewayAuth(deps);
  const { resolver, auth } = parts;
  const api = gatewayApi(deps, parts);
  const sockets = new ExecSockets({
    manager: deps.sandboxManager,
    // The upgrade takes what its route (`…/execute/ws`) declares.
    authenticate: (req) => auth.authenticate(req, declaredAccess(api, 'GET', req.url)),
    logger: deps.logger,
  });
  const document = () => gatewayOpenApiDocument(api);
  // The approval page posts an HTML form; nothing else takes form-encoded bodies.
  const forms = express.Router().use('/login', express.urlencoded({ extended: false, limit: '8kb' }));
  const inner = createApp({ logger: deps.logger, routes: [docsRouter(document, 'Berth API'), forms, api.router()], logUrl: hideSecrets });
  // Deployment traffic is proxied before the common middleware: its bodies must stream through
  // untouched (createApp's JSON parser would consume them), and it logs its own requests.
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const proxyDeps = { resolver, auth, logger: deps.logger, ...(deps.publicUrl ? { publicUrl: deps.publicUrl } : {}) };
  app.use(deploymentProxy(proxyDeps));
  app.use(gatewayCors(deps.corsAllowOrigins ?? [], deps.publicUrl));
  // Run batches are larger than other JSON bodies: parsed by their own parser first.
  app.use(traceJsonParser(deps.traceLimits));
  app.use(inner);
  return { app, sockets, deploymentSockets: new DeploymentSockets(proxyDeps) };
}

/**
 * CORS of the gateway's own API: the operator's origins and the gateway's public one (where the
 * console is served). Preflights are answered before authentication; no credentials (cookies) are
 * ever allowed: the API takes header credentials, which a preflight has to allow first.
 */
function gatewayCors(origins: string[], publicUrl: string | undefined): RequestHandler {
  const fixed = publicUrl ? new CorsPolicy({ allow_origins: [...origins, new URL(publicUrl).origin] }) : undefined;
  return cors((req) => fixed ?? new CorsPolicy({ allow_origins: [...origins, new URL(publicOrigin(req, undefined)).origin] }));
}

/** The proxy is not an Api route; it is documented by hand (any method, any path below the deployment). */
function proxyOperations(): Record<string, Record<string, unknown>> {
  const operation = (method: string) => ({
    summary: 'Call the agent server of a deployment',
    description:
      'The `deployment_url` of a deployment: every method and path below it is proxied, streaming both ways, to the ' +
      'agent server of its serving revision (point a LangGraph SDK client at it). Without a custom auth handler in ' +
      'the project, an API key or bearer token of the deployment’s tenant is required and is not passed on, or a ' +
      'console session of the tenant (the console’s Studio: from the gateway’s own pages only, with X-CSRF-Token on ' +
      'unsafe methods; not on a WebSocket); with one, every header passes to the project’s handler — except the ' +
      'console session cookie, which is never passed on and counts for nothing there. Answers carry `Content-Security-Policy: sandbox …` (no `allow-same-origin`): pages ' +
      'a deployment serves never act as the gateway’s origin. 401: no or bad credential (whatever the id). 404: unknown ' +
      'deployment (or one of another tenant). 502: the agent server answered malformed. 503 with Retry-After: no ' +
      'revision serves yet, or its agent server is restarting.',
    tags: ['deployments'],
    operationId: `${method}DeploymentProxy`,
    parameters: [
      { name: 'deployment_id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } },
      { name: 'path', in: 'path', required: true, schema: { type: 'string' }, description: 'Any agent-server path' },
    ],
    responses: { default: { description: 'The agent server’s answer' } },
    security: [...Object.keys(securitySchemes).map((name) => ({ [name]: [] })), {}],
  });
  return Object.fromEntries(['get', 'post', 'put', 'patch', 'delete'].map((m) => [m, operation(m)]));
}

/** Login flow secrets travel in paths; keep them out of the request log. */
export function hideSecrets(url: string): string {
  return url.replace(/^(\/v2\/auth\/wait\/|\/login\/)[^/?#]+/, '$1[redacted]');
}
