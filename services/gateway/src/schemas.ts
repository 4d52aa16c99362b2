/**
 * Request and response schemas of the gateway's own API. Request objects are strict (unknown
 * fields are a 422); response objects strip anything they do not declare.
 */
import { z } from 'zod';
import { Uuid } from '@berth/ids';
import type { ApiKeyRecord, Tenant } from '@berth/auth';

const timestamp = z.iso.datetime({ offset: true });

export const TenantOut = z.object({
  tenant_id: Uuid,
  name: z.string(),
  is_system: z.boolean().describe('The tenant created at bootstrap; its admin keys administer the platform'),
  created_at: timestamp,
});

export const ApiKeyOut = z.object({
  id: Uuid,
  tenant_id: Uuid,
  name: z.string(),
  role: z.enum(['admin', 'member']),
  prefix: z.string().describe('First characters of the key, to recognise it'),
  created_at: timestamp,
  last_used_at: timestamp.nullable(),
  expires_at: timestamp.nullable(),
  revoked_at: timestamp.nullable(),
});

export const ApiKeyCreatedOut = ApiKeyOut.extend({
  key: z.string().describe('The API key itself. It is shown only in this response; store it now.'),
});

export const TenantCreatedOut = z.object({ tenant: TenantOut, api_key: ApiKeyCreatedOut });

export const TenantPath = z.strictObject({ tenant_id: Uuid });
export const ApiKeyPath = z.strictObject({ tenant_id: Uuid, key_id: Uuid });

export const Page = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
});

export const CreateTenantBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
});

export const CreateApiKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(200),
  role: z.enum(['admin', 'member']).default('member').describe('admin keys manage the keys of their tenant'),
  expires_at: timestamp.optional().describe('When the key stops working; never when omitted'),
});

export const CreateTokenBody = z.strictObject({
  expires_in: z
    .number()
    .int()
    .min(60)
    .max(30 * 24 * 3600)
    .default(3600)
    .describe('Lifetime in seconds'),
});

export const TokenOut = z.object({
  access_token: z.string(),
  token_type: z.literal('bearer'),
  expires_in: z.number().int(),
  expires_at: timestamp,
});

export const SessionBody = z.strictObject({
  api_key: z.string().max(200).describe('An API key of your tenant; the session acts as this key'),
});

export const SessionOut = z.object({
  tenant_id: Uuid,
  key_name: z.string().describe('Name of the API key the session acts as'),
  csrf_token: z.string().describe('Send it as X-CSRF-Token on every POST, PUT, PATCH and DELETE made with the session cookie'),
  expires_at: timestamp.describe('When the session ends at the latest; an hour without requests ends it sooner (by default)'),
});

export const MeOut = z.object({
  tenant_id: Uuid,
  tenant_name: z.string(),
  role: z.enum(['admin', 'member']),
  platform_admin: z.boolean(),
  credential: z.object({
    type: z.enum(['api_key', 'access_token', 'session']),
    id: Uuid,
    prefix: z.string().optional(),
  }),
});

export function tenantJson(t: Tenant): z.input<typeof TenantOut> {
  return { tenant_id: t.id, name: t.name, is_system: t.is_system, created_at: t.created_at.toISOString() };
}

export function apiKeyJson(k: ApiKeyRecord): z.input<typeof ApiKeyOut> {
  return {
    id: k.id,
    tenant_id: k.tenant_id,
    name: k.name,
    role: k.role,
    prefix: k.prefix,
    created_at: k.created_at.toISOString(),
    last_used_at: k.last_used_at?.toISOString() ?? null,
    expires_at: k.expires_at?.toISOString() ?? null,
    revoked_at: k.revoked_at?.toISOString() ?? null,
  };
}

/** Longest `timeout` of GET /v2/auth/wait, in seconds. */
export const MAX_AUTH_WAIT_SECONDS = 300;

const integerText = /^\s*[+-]?\d+\s*$/;

export const AuthWaitPath = z.strictObject({ auth_id: z.string().min(1).max(256) });

export const AuthWaitQuery = z.strictObject({
  // Query values arrive as text: only an integer literal is one ("", "1.5", "1e2" are not).
  timeout: z
    .preprocess(
      (v) => (typeof v === 'string' && integerText.test(v) ? Number(v) : v),
      z
        .int({ error: 'Input should be a valid integer' })
        .min(0, { error: 'Input should be greater than or equal to 0' })
        .max(MAX_AUTH_WAIT_SECONDS, { error: `Input should be less than or equal to ${MAX_AUTH_WAIT_SECONDS}` }),
    )
    .default(30)
    .meta({ default: 30 })
    .describe(`Seconds to wait for the flow to complete, 0 to ${MAX_AUTH_WAIT_SECONDS}; 0 only checks`),
});

export const AuthWaitResponse = z.object({
  status: z.enum(['completed', 'pending', 'timeout', 'not_found']),
  token: z.string().nullable().describe('The bearer token: in the first completed answer only, else null'),
});

export const LoginStartBody = z.strictObject({
  client_name: z.string().trim().max(200).optional().describe('Shown on the approval page, e.g. "berth CLI on laptop"'),
});

export const LoginStartOut = z.object({
  auth_id: z.string().describe('The secret to wait on; keep it to yourself'),
  url: z.string().describe('The approval page to open in a browser'),
  expires_at: timestamp,
});

export const LoginPagePath = z.strictObject({ approval_id: z.string().min(1).max(256) });

export const LoginApproveBody = z.strictObject({
  api_key: z.string().max(512).optional(),
  csrf_token: z.string().max(512).optional(),
});
