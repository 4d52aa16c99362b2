import { assertTenantAdmin, type AuthStore } from '@berth/auth';
import { z } from 'zod';
import { ApiKeyCreatedOut, ApiKeyOut, ApiKeyPath, CreateApiKeyBody, TenantPath, apiKeyJson } from '../schemas.js';
import type { GatewayApi } from '../access.js';

export function apiKeyRoutes(api: GatewayApi, store: AuthStore): void {
  api
    .route({
      method: 'post',
      path: '/v1/tenants/{tenant_id}/api-keys',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create an API key (the key is shown only in this response)',
      tags: ['api-keys'],
      params: TenantPath,
      body: CreateApiKeyBody,
      status: 201,
      response: ApiKeyCreatedOut,
      errors: [404],
      handler: async ({ params, body, auth }) => {
        assertTenantAdmin(auth, params.tenant_id);
        const { record, key } = await store.createApiKey({
          tenantId: params.tenant_id,
          name: body.name,
          role: body.role,
          ...(body.expires_at ? { expiresAt: new Date(body.expires_at) } : {}),
        });
        return { ...apiKeyJson(record), key };
      },
    })
    .route({
      method: 'get',
      path: '/v1/tenants/{tenant_id}/api-keys',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List API keys (revoked ones included, marked by revoked_at)',
      tags: ['api-keys'],
      params: TenantPath,
      response: z.array(ApiKeyOut),
      handler: async ({ params, auth }) => {
        assertTenantAdmin(auth, params.tenant_id);
        return (await store.listApiKeys(params.tenant_id)).map(apiKeyJson);
      },
    })
    .route({
      method: 'delete',
      path: '/v1/tenants/{tenant_id}/api-keys/{key_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Revoke an API key (and the bearer tokens it minted)',
      tags: ['api-keys'],
      params: ApiKeyPath,
      response: ApiKeyOut,
      errors: [404, 409],
      handler: async ({ params, auth }) => {
        assertTenantAdmin(auth, params.tenant_id);
        return apiKeyJson(await store.revokeApiKey(params.tenant_id, params.key_id));
      },
    });
}
