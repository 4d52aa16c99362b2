/**
 * Tenants, API keys and access tokens in Postgres (the gateway's schema).
 */
import { randomUUID } from 'node:crypto';
import { ConflictError, NotFoundError } from '@berth/errors';
import { sql, type Kysely, type Selectable } from '@berth/db';
import { digest, generateAccessToken, generateApiKey, looksLikeAccessToken, looksLikeApiKey } from './secrets.js';
import { ConsoleSessions, type SessionClock, type SessionLimits } from './sessions.js';
import type { Principal, Role } from './principal.js';
import type { ApiKeysTable, AuthTables, TenantsTable } from './tables.js';

export type { Principal, Role } from './principal.js';

export interface Tenant {
  id: string;
  name: string;
  is_system: boolean;
  created_at: Date;
}

/** An API key as listed: never the key itself. */
export interface ApiKeyRecord {
  id: string;
  tenant_id: string;
  name: string;
  role: Role;
  prefix: string;
  created_at: Date;
  last_used_at: Date | null;
  expires_at: Date | null;
  revoked_at: Date | null;
}

const keyColumns = ['id', 'tenant_id', 'name', 'role', 'prefix', 'created_at', 'last_used_at', 'expires_at', 'revoked_at'] as const;

function tenantOf(row: Selectable<TenantsTable>): Tenant {
  return { id: row.id, name: row.name, is_system: row.is_system, created_at: row.created_at };
}

function keyOf(row: Pick<Selectable<ApiKeysTable>, (typeof keyColumns)[number]>): ApiKeyRecord {
  return { ...row };
}

export interface CreateApiKeyInput {
  tenantId: string;
  name: string;
  /** @default 'member' */
  role?: Role;
  expiresAt?: Date;
}

export class AuthStore {
  constructor(private readonly db: Kysely<AuthTables>) {}

  async createTenant(input: { name: string; isSystem?: boolean }): Promise<Tenant> {
    const row = await this.db
      .insertInto('tenants')
      .values({ id: randomUUID(), name: input.name, is_system: input.isSystem ?? false })
      .returningAll()
      .executeTakeFirstOrThrow();
    return tenantOf(row);
  }

  async getTenant(id: string): Promise<Tenant> {
    const row = await this.db.selectFrom('tenants').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(`Tenant ${id} not found`);
    return tenantOf(row);
  }

  async systemTenant(): Promise<Tenant | undefined> {
    const row = await this.db.selectFrom('tenants').selectAll().where('is_system', '=', true).executeTakeFirst();
    return row && tenantOf(row);
  }

  async listTenants(page: { limit: number; offset: number }): Promise<Tenant[]> {
    const rows = await this.db.selectFrom('tenants').selectAll().orderBy('created_at').orderBy('id').limit(page.limit).offset(page.offset).execute();
    return rows.map(tenantOf);
  }

  /** Creates a key; the returned `key` is the only time the secret is ever available. */
  async createApiKey(input: CreateApiKeyInput): Promise<{ record: ApiKeyRecord; key: string }> {
    await this.getTenant(input.tenantId);
    const { key, prefix } = generateApiKey();
    const row = await this.db
      .insertInto('api_keys')
      .values({
        id: randomUUID(),
        tenant_id: input.tenantId,
        name: input.name,
        role: input.role ?? 'member',
        prefix,
        key_hash: digest(key),
        expires_at: input.expiresAt ?? null,
      })
      .returning(keyColumns)
      .executeTakeFirstOrThrow();
    return { record: keyOf(row), key };
  }

  async listApiKeys(tenantId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.db.selectFrom('api_keys').select(keyColumns).where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
    return rows.map(keyOf);
  }

  async getApiKey(tenantId: string, keyId: string): Promise<ApiKeyRecord> {
    const row = await this.db.selectFrom('api_keys').select(keyColumns).where('tenant_id', '=', tenantId).where('id', '=', keyId).executeTakeFirst();
    if (!row) throw new NotFoundError(`API key ${keyId} not found`);
    return keyOf(row);
  }

  /** Revokes a key (and the tokens it minted stop working with it). Revoking twice is a conflict. */
  async revokeApiKey(tenantId: string, keyId: string): Promise<ApiKeyRecord> {
    const row = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: sql<Date>`now()` })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .returning(keyColumns)
      .executeTakeFirst();
    if (row) return keyOf(row);
    const existing = await this.getApiKey(tenantId, keyId);
    throw new ConflictError(`API key ${existing.id} was already revoked at ${existing.revoked_at?.toISOString()}`);
  }

  /** The principal for a live API key, or undefined for an unknown, revoked or expired one. */
  async verifyApiKey(key: string): Promise<Principal | undefined> {
    if (!looksLikeApiKey(key)) return undefined;
    const row = await this.db
      .selectFrom('api_keys')
      .innerJoin('tenants', 'tenants.id', 'api_keys.tenant_id')
      .select(['api_keys.id', 'api_keys.tenant_id', 'api_keys.role', 'api_keys.prefix', 'api_keys.last_used_at', 'tenants.is_system'])
      .where('api_keys.key_hash', '=', digest(key))
      .where('api_keys.revoked_at', 'is', null)
      .where((eb) => eb.or([eb('api_keys.expires_at', 'is', null), eb('api_keys.expires_at', '>', sql<Date>`now()`)]))
      .executeTakeFirst();
    if (!row) return undefined;
    this.touch(row.id, row.last_used_at);
    return {
      tenantId: row.tenant_id,
      role: row.role,
      platformAdmin: row.is_system && row.role === 'admin',
      credential: { type: 'api_key', id: row.id, prefix: row.prefix },
    };
  }

  /** Mints a bearer token for the holder of an API key. */
  async issueAccessToken(input: { apiKeyId: string; tenantId: string; ttlSeconds: number }): Promise<{ token: string; expiresAt: Date }> {
    const token = generateAccessToken();
    const row = await this.db
      .insertInto('access_tokens')
      .values({
        id: randomUUID(),
        tenant_id: input.tenantId,
        api_key_id: input.apiKeyId,
        token_hash: digest(token),
        expires_at: sql<Date>`now() + make_interval(secs => ${input.ttlSeconds})`,
      })
      .returning('expires_at')
      .executeTakeFirstOrThrow();
    return { token, expiresAt: row.expires_at };
  }

  /** The principal for a live token whose minting key is still live, else undefined. */
  async verifyAccessToken(token: string): Promise<Principal | undefined> {
    if (!looksLikeAccessToken(token)) return undefined;
    const row = await this.db
      .selectFrom('access_tokens')
      .innerJoin('api_keys', 'api_keys.id', 'access_tokens.api_key_id')
      .innerJoin('tenants', 'tenants.id', 'access_tokens.tenant_id')
      .select(['access_tokens.id', 'access_tokens.tenant_id', 'access_tokens.api_key_id', 'api_keys.role', 'tenants.is_system'])
      .where('access_tokens.token_hash', '=', digest(token))
      .where('access_tokens.revoked_at', 'is', null)
      .where('access_tokens.expires_at', '>', sql<Date>`now()`)
      .where('api_keys.revoked_at', 'is', null)
      .where((eb) => eb.or([eb('api_keys.expires_at', 'is', null), eb('api_keys.expires_at', '>', sql<Date>`now()`)]))
      .executeTakeFirst();
    if (!row) return undefined;
    return {
      tenantId: row.tenant_id,
      role: row.role,
      platformAdmin: row.is_system && row.role === 'admin',
      credential: { type: 'access_token', id: row.id, apiKeyId: row.api_key_id },
    };
  }

  /** The console sessions of these tenants' keys, timed by `clock`. */
  consoleSessions(limits: SessionLimits, clock: SessionClock): ConsoleSessions {
    return new ConsoleSessions(this.db, limits, clock);
  }

  /**
   * Makes sure the system tenant exists and mints a new admin key for it. Used by `berth up` on
   * first start (and again only when the stored key no longer works).
   */
  async bootstrap(tenantName = 'default'): Promise<{ tenant: Tenant; key: string; record: ApiKeyRecord }> {
    let tenant = await this.systemTenant();
    if (!tenant) {
      tenant = await this.createTenant({ name: tenantName, isSystem: true }).catch(async (error: unknown) => {
        // Two processes bootstrapping at once: the unique index lets one win; use its tenant.
        const winner = await this.systemTenant();
        if (!winner) throw error;
        return winner;
      });
    }
    const { record, key } = await this.createApiKey({ tenantId: tenant.id, name: 'bootstrap', role: 'admin' });
    return { tenant, key, record };
  }

  // Writing last_used_at on every request would turn each read into a write; once a minute is enough.
  private touch(keyId: string, lastUsed: Date | null): void {
    if (lastUsed && Date.now() - lastUsed.getTime() < 60_000) return;
    void this.db
      .updateTable('api_keys')
      .set({ last_used_at: sql<Date>`now()` })
      .where('id', '=', keyId)
      .execute()
      .catch(() => undefined);
  }
}
