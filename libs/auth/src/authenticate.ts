/**
 * Establishes the principal of an HTTP request from its headers: `X-Api-Key` (any case) or
 * `Authorization: Bearer <token>`, checked against `X-Tenant-Id` when that is sent.
 */
import { PermissionDeniedError, UnauthenticatedError } from '@berth/errors';
import type { AuthStore, Principal } from './store.js';

type Headers = Record<string, string | string[] | undefined>;

function header(headers: Headers, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export async function authenticateHeaders(store: AuthStore, headers: Headers): Promise<Principal> {
  // Node lower-cases incoming header names, so X-Api-Key and x-api-key arrive alike.
  const apiKey = header(headers, 'x-api-key')?.trim();
  const authorization = header(headers, 'authorization')?.trim();
  let principal: Principal | undefined;
  if (apiKey) {
    principal = await store.verifyApiKey(apiKey);
    if (!principal) throw new UnauthenticatedError('Invalid API key');
  } else if (authorization) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw new UnauthenticatedError('Authorization header must be "Bearer <token>"');
    principal = await store.verifyAccessToken(match[1]!);
    if (!principal) throw new UnauthenticatedError('Invalid or expired bearer token');
  } else {
    throw new UnauthenticatedError('Missing credentials: send an X-Api-Key header or Authorization: Bearer <token>');
  }
  const tenantId = header(headers, 'x-tenant-id')?.trim();
  if (tenantId && tenantId.toLowerCase() !== principal.tenantId) {
    throw new PermissionDeniedError('These credentials are not valid for the tenant in X-Tenant-Id');
  }
  return principal;
}

/** Refuses unless the principal may administer the given tenant (its admin, or a platform admin). */
export function assertTenantAdmin(principal: Principal, tenantId: string): void {
  if (principal.platformAdmin) return;
  if (principal.tenantId !== tenantId) throw new PermissionDeniedError('These credentials are not valid for this tenant');
  if (principal.role !== 'admin') throw new PermissionDeniedError('This action needs an admin API key of the tenant');
}

export function assertPlatformAdmin(principal: Principal): void {
  if (!principal.platformAdmin) throw new PermissionDeniedError('This action needs an admin API key of the system tenant');
}
