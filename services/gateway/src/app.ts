/**
 * The gateway's HTTP app: authentication in front of every non-public route, the platform's own
 * endpoints (tenants, API keys, tokens, health) and the OpenAPI document and docs page.
 */
import { authenticateHeaders, type AuthStore, type Principal } from '@berth/auth';
import { Api, createApp, docsRouter, openApiDocument } from '@berth/http';
import type { Logger } from '@berth/log';
import type { Express } from 'express';
import { apiKeyRoutes } from './routes/api-keys.js';
import { healthRoutes, type ReadinessCheck } from './routes/health.js';
import { meRoutes } from './routes/me.js';
import { tenantRoutes } from './routes/tenants.js';
import { BERTH_VERSION } from './version.js';

export interface GatewayAppDeps {
  logger: Logger;
  store: AuthStore;
  readiness: Record<string, ReadinessCheck>;
}

export const securitySchemes = {
  ApiKey: { type: 'apiKey', in: 'header', name: 'X-Api-Key', description: 'An API key of the tenant' },
  TenantId: { type: 'apiKey', in: 'header', name: 'X-Tenant-Id', description: 'Optional; must match the key’s tenant' },
  Bearer: { type: 'http', scheme: 'bearer', description: 'A token from POST /v1/auth/tokens' },
};

export function gatewayApi(deps: GatewayAppDeps): Api<Principal> {
  const api = new Api<Principal>({ authenticate: (req) => authenticateHeaders(deps.store, req.headers) });
  healthRoutes(api, deps.readiness);
  meRoutes(api, deps.store);
  tenantRoutes(api, deps.store);
  apiKeyRoutes(api, deps.store);
  return api;
}

export function createGatewayApp(deps: GatewayAppDeps): Express {
  const api = gatewayApi(deps);
  const document = () =>
    openApiDocument([api as never], {
      title: 'Berth',
      version: BERTH_VERSION,
      description: 'The Berth platform API: tenants, API keys and tokens; deployments, sandboxes and exports as they land.',
      securitySchemes,
    });
  return createApp({ logger: deps.logger, routes: [docsRouter(document, 'Berth API'), api.router()] });
}
