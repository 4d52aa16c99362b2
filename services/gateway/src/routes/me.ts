import { type AuthStore } from '@berth/auth';
import { PermissionDeniedError } from '@berth/errors';
import { CreateTokenBody, MeOut, TokenOut } from '../schemas.js';
import type { GatewayApi } from '../access.js';

export function meRoutes(api: GatewayApi, store: AuthStore): void {
  api
    .route({
      method: 'get',
      path: '/v1/me',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Who the credentials belong to',
      tags: ['auth'],
      response: MeOut,
      handler: async ({ auth }) => {
        const tenant = await store.getTenant(auth.tenantId);
        return {
          tenant_id: tenant.id,
          tenant_name: tenant.name,
          role: auth.role,
          platform_admin: auth.platformAdmin,
          credential:
            auth.credential.type === 'api_key'
              ? { type: 'api_key' as const, id: auth.credential.id, prefix: auth.credential.prefix }
              : // The route takes no tracing credential.
                { type: auth.credential.type as 'access_token' | 'session', id: auth.credential.id },
        };
      },
    })
    .route({
      method: 'post',
      path: '/v1/auth/tokens',
      access: ['api_key'],
      summary: 'Exchange an API key for a bearer token',
      description:
        'The token acts with the tenant and role of the key, and stops working when the key is revoked. Takes the key ' +
        'itself only: not a console session, whose sign-out and short lifetime a token would outlive.',
      tags: ['auth'],
      body: CreateTokenBody,
      status: 201,
      response: TokenOut,
      handler: async ({ body, auth }) => {
        if (auth.credential.type !== 'api_key') throw new PermissionDeniedError('Bearer tokens are issued only to API keys');
        const { token, expiresAt } = await store.issueAccessToken({
          apiKeyId: auth.credential.id,
          tenantId: auth.tenantId,
          ttlSeconds: body.expires_in,
        });
        return { access_token: token, token_type: 'bearer' as const, expires_in: body.expires_in, expires_at: expiresAt.toISOString() };
      },
    });
}
