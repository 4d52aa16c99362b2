/**
 * Who a request is, for every authenticated route and the deployment proxy: an API key or bearer
 * token of a tenant (`authenticateHeaders`), a console session (the `berth_session` cookie, only
 * when no credential header is sent; see `sessionPrincipal`), or a deployment's tracing
 * credential — what its agent servers trace with (`X-Api-Key: brt_trace_<deployment id>_<mac>`,
 * made by the control plane from the platform key). The latter acts for the deployment's tenant on
 * its tracing project only, and only on the routes whose declared access takes
 * `tracing_credential` (the trace API); everywhere else it is refused with 403, as is any
 * credential a route does not declare. The gateway holds no platform key: it asks the control
 * plane (ResolveDeployment, through the proxy's cached resolver) for the credential it expects, so
 * a deleted deployment's credential stops working within the cache's TTL.
 */
import { timingSafeEqual } from 'node:crypto';
import { authenticateHeaders, sessionCsrfToken, type AuthStore, type ConsoleSessions, type Principal } from '@berth/auth';
import { PermissionDeniedError, UnauthenticatedError } from '@berth/errors';
import { tracingCredentialDeployment } from '@berth/ids';
import { describeCredentials, type GatewayCredential } from './access.js';
import { fromGatewayPages } from './browser-origin.js';
import { cookieValue, SESSION_COOKIE } from './cookies.js';
import type { DeploymentResolver } from './proxy/resolver.js';

type Headers = Record<string, string | string[] | undefined>;

/** A request as far as authentication looks at it (an express Request or an IncomingMessage). */
export interface AuthRequest {
  headers: Headers;
  /** Unset counts as an unsafe method (a console session then needs its CSRF token). */
  method?: string | undefined;
}

/** The header carrying a console session's CSRF token on unsafe methods. */
export const CSRF_HEADER = 'x-csrf-token';

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export interface GatewayAuthenticatorOptions {
  /** See GatewayConfig.publicUrl: the origin of the gateway's own pages, besides the one a request was sent to. */
  publicUrl?: string;
}

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return (Array.isArray(value) ? value[0] : value)?.trim();
}

function sameText(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

export class GatewayAuthenticator {
  constructor(
    private readonly store: AuthStore,
    private readonly deployments: DeploymentResolver,
    private readonly sessions: ConsoleSessions,
    private readonly options: GatewayAuthenticatorOptions = {},
  ) {}

  /**
   * The request's principal, when its credential is valid (else UnauthenticatedError, 401) and of a
   * kind the route takes (`accepts`, the route's declared access; else PermissionDeniedError, 403).
   */
  async authenticate(req: AuthRequest, accepts: readonly GatewayCredential[]): Promise<Principal> {
    const principal = await this.principal(req);
    const kind = principal.credential.type;
    if (!accepts.includes(kind)) {
      throw new PermissionDeniedError(
        kind === 'tracing_credential'
          ? 'A deployment’s tracing credential may only call the trace API (/info, /runs, /sessions, /feedback, /api/v1/sessions, /api/v2/runs, /api/v2/traces, /api/v2/threads)'
          : `This route takes ${describeCredentials(accepts)}, not ${describeCredentials([kind])}`,
      );
    }
    return principal;
  }

  private async principal(req: AuthRequest): Promise<Principal> {
    const apiKey = header(req.headers, 'x-api-key');
    const session = cookieValue(req.headers, SESSION_COOKIE);
    const deploymentId = apiKey ? tracingCredentialDeployment(apiKey) : undefined;
    let principal: Principal;
    if (deploymentId) principal = await this.tracingPrincipal(deploymentId, apiKey!);
    // A credential header is the caller's explicit choice; the cookie is what a browser attaches by itself.
    else if (session && !apiKey && !header(req.headers, 'authorization')) principal = await this.sessionPrincipal(req, session);
    else return authenticateHeaders(this.store, req.headers);
    const tenantId = header(req.headers, 'x-tenant-id');
    if (tenantId && tenantId.toLowerCase() !== principal.tenantId) {
      throw new PermissionDeniedError('These credentials are not valid for the tenant in X-Tenant-Id');
    }
    return principal;
  }

  /**
   * A console session: live (else 401), used from the gateway's own pages (else 403), and on an
   * unsafe method carrying its CSRF token in X-CSRF-Token (else 403).
   */
  private async sessionPrincipal(req: AuthRequest, token: string): Promise<Principal> {
    const found = await this.sessions.verify(token);
    if (!found) throw new UnauthenticatedError('The console session has ended (expired, signed out, or its API key revoked); sign in again');
    if (!fromGatewayPages(req.headers, this.options.publicUrl)) {
      throw new PermissionDeniedError('A console session is accepted only from the gateway’s own pages');
    }
    if (!SAFE_METHODS.has((req.method ?? '').toUpperCase())) {
      const presented = header(req.headers, CSRF_HEADER);
      if (!presented || !sameText(presented, sessionCsrfToken(token))) {
        throw new PermissionDeniedError(`Missing or wrong ${CSRF_HEADER} header: send the csrf_token of GET /v1/auth/session`);
      }
    }
    return found.principal;
  }

  private async tracingPrincipal(deploymentId: string, presented: string): Promise<Principal> {
    const deployment = await this.deployments.resolve(deploymentId);
    // One answer for an unknown (or deleted) deployment and a wrong mac: nothing is learnt.
    if (!deployment?.tracingCredential || !sameText(deployment.tracingCredential, presented)) {
      throw new UnauthenticatedError('Invalid tracing credential');
    }
    return {
      tenantId: deployment.tenantId,
      role: 'member',
      platformAdmin: false,
      credential: { type: 'tracing_credential', id: deploymentId },
      tracingProject: { id: deployment.sessionId, name: deployment.name },
    };
  }
}
