/**
 * Who a request is, for every authenticated route and the deployment proxy: an API key or bearer
 * token of a tenant (`authenticateHeaders`), or a deployment's tracing credential — what its agent
 * servers trace with (`X-Api-Key: brt_trace_<deployment id>_<mac>`, made by the control plane from
 * the platform key). The latter acts for the deployment's tenant on its tracing project only, and
 * only on the routes whose declared access takes `tracing_credential` (the trace API); everywhere
 * else it is refused with 403, as is any credential a route does not declare. The gateway holds no platform key:
 * it asks the control plane (ResolveDeployment, through the proxy's cached resolver) for the
 * credential it expects, so a deleted deployment's credential stops working within the cache's TTL.
 */
import { timingSafeEqual } from 'node:crypto';
import { authenticateHeaders, type AuthStore, type Principal } from '@berth/auth';
import { PermissionDeniedError, UnauthenticatedError } from '@berth/errors';
import { tracingCredentialDeployment } from '@berth/ids';
import { describeCredentials, type GatewayCredential } from './access.js';
import type { DeploymentResolver } from './proxy/resolver.js';

type Headers = Record<string, string | string[] | undefined>;

/** A request as far as authentication looks at it (an express Request or an IncomingMessage). */
export interface AuthRequest {
  headers: Headers;
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
          ? 'A deployment’s tracing credential may only call the trace API (/info, /runs, /sessions)'
          : `This route takes ${describeCredentials(accepts)}, not ${describeCredentials([kind])}`,
      );
    }
    return principal;
  }

  private async principal(req: AuthRequest): Promise<Principal> {
    const apiKey = header(req.headers, 'x-api-key');
    const deploymentId = apiKey ? tracingCredentialDeployment(apiKey) : undefined;
    if (!apiKey || !deploymentId) return authenticateHeaders(this.store, req.headers);
    const principal = await this.tracingPrincipal(deploymentId, apiKey);
    const tenantId = header(req.headers, 'x-tenant-id');
    if (tenantId && tenantId.toLowerCase() !== principal.tenantId) {
      throw new PermissionDeniedError('These credentials are not valid for the tenant in X-Tenant-Id');
    }
    return principal;
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
