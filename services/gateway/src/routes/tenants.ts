import { assertPlatformAdmin, type AuthStore } from '@berth/auth';
import { PermissionDeniedError } from '@berth/errors';
import { z } from 'zod';
import { apiKeyJson, CreateTenantBody, Page, TenantCreatedOut, TenantOut, TenantPath, tenantJson } from '../schemas.js';
import type { GatewayApi } from '../access.js';

export function tenantRoutes(api: GatewayApi, store: AuthStore): void {
  api
    .route({
      method: 'post',
      path: '/v1/tenants',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a tenant and its first admin API key',
      tags: ['tenants'],
      body: CreateTenantBody,
      status: 201,
      response: TenantCreatedOut,
      handler: async ({ body, auth }) => {
        assertPlatformAdmin(auth);
        const tenant = await store.createTenant({ name: body.name });
        const { record, key } = await store.createApiKey({ tenantId: tenant.id, name: 'admin', role: 'admin' });
        return { tenant: tenantJson(tenant), api_key: { ...apiKeyJson(record), key } };
      },
    })
    .route({
      method: 'get',
      path: '/v1/tenants',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List tenants',
      tags: ['tenants'],
      query: Page,
      response: z.object({ resources: z.array(TenantOut), offset: z.number().int() }),
      handler: async ({ query, auth }) => {
        assertPlatformAdmin(auth);
        const tenants = await store.listTenants(query);
        return { resources: tenants.map(tenantJson), offset: query.offset + tenants.length };
      },
    })
    .route({
      method: 'get',
      path: '/v1/tenants/{tenant_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a tenant',
      tags: ['tenants'],
      params: TenantPath,
      response: TenantOut,
      errors: [404],
      handler: async ({ params, auth }) => {
        if (!auth.platformAdmin && auth.tenantId !== params.tenant_id) {
          throw new PermissionDeniedError('These credentials are not valid for this tenant');
        }
        return tenantJson(await store.getTenant(params.tenant_id));
      },
    });
}
