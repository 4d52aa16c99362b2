/**
 * Console sessions: what a browser holds after signing in with an API key (the `berth_session`
 * cookie), so the key itself never stays in the browser. A session is an opaque random token
 * stored only as its digest, bound to the key it was made from: it acts with that key's tenant and
 * role, and is refused as soon as the key is revoked or expired (checked on every request, so with
 * no delay) and deleted with it. It ends after `idleSeconds` without use and, however busy, after
 * `maxSeconds`; a key holds at most `perKey` live sessions (signing in again ends the oldest).
 * Times come from the service's clock, so tests move them by hand.
 */
import { createHash, randomUUID } from 'node:crypto';
import { sql, type Kysely } from '@berth/db';
import type { Principal } from './principal.js';
import { digest, generateSessionToken, looksLikeSessionToken } from './secrets.js';
import type { AuthTables } from './tables.js';

export interface SessionLimits {
  /** Seconds a session lives without a request. */
  idleSeconds: number;
  /** Seconds a session lives at most, however active. */
  maxSeconds: number;
  /** Live sessions one API key may hold; signing in beyond it ends the key's oldest. */
  perKey: number;
}

/** The gateway's defaults (its env settings CONSOLE_SESSION_*). */
export const DEFAULT_SESSION_LIMITS: SessionLimits = { idleSeconds: 3600, maxSeconds: 12 * 3600, perKey: 10 };

/** The time source (a `@berth/clock` Clock fits). */
export interface SessionClock {
  now(): number;
}

/** A session as its owner may see it. */
export interface SessionRecord {
  id: string;
  tenantId: string;
  /** Name of the API key it was made from. */
  keyName: string;
  /** When it ends at the latest (idleness may end it sooner). */
  expiresAt: Date;
}

/**
 * The CSRF token of a session: derived from its token (so nothing more is stored, and a reloaded
 * page gets the same one back), and useless without it. Domain-separated from the stored digest.
 */
export function sessionCsrfToken(sessionToken: string): string {
  return createHash('sha256').update('berth console csrf\0').update(sessionToken, 'utf8').digest('base64url');
}

// Extending the idle expiry on every request would turn each read into a write; once a minute is enough.
const EXTEND_AFTER_MS = 60_000;

export class ConsoleSessions {
  constructor(
    private readonly db: Kysely<AuthTables>,
    private readonly limits: SessionLimits,
    private readonly clock: SessionClock,
  ) {}

  /**
   * Starts a session for a live API key (a principal from `verifyApiKey`); returns its token, the
   * only time it is available. Ends the key's expired sessions, and its oldest beyond the limit.
   */
  async create(key: Principal): Promise<{ token: string; session: SessionRecord }> {
    if (key.credential.type !== 'api_key') throw new TypeError('Console sessions are made from API keys only');
    const apiKeyId = key.credential.id;
    const now = this.clock.now();
    const nowDate = new Date(now);
    const token = generateSessionToken();
    const id = randomUUID();
    const expiresAt = new Date(now + this.limits.maxSeconds * 1000);
    const keyName = await this.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('console_sessions')
        .values({
          id,
          tenant_id: key.tenantId,
          api_key_id: apiKeyId,
          token_hash: digest(token),
          created_at: nowDate,
          idle_expires_at: new Date(Math.min(now + this.limits.idleSeconds * 1000, expiresAt.getTime())),
          expires_at: expiresAt,
        })
        .execute();
      // The new session always stays; of the others, the newest perKey - 1 live ones do.
      await trx
        .deleteFrom('console_sessions')
        .where('api_key_id', '=', apiKeyId)
        .where('id', '!=', id)
        .where((eb) =>
          eb.or([
            eb('expires_at', '<=', nowDate),
            eb('idle_expires_at', '<=', nowDate),
            eb(
              'id',
              'not in',
              eb
                .selectFrom('console_sessions')
                .select('id')
                .where('api_key_id', '=', apiKeyId)
                .where('id', '!=', id)
                .orderBy('seq', 'desc')
                .limit(this.limits.perKey - 1),
            ),
          ]),
        )
        .execute();
      const row = await trx.selectFrom('api_keys').select('name').where('id', '=', apiKeyId).executeTakeFirstOrThrow();
      return row.name;
    });
    return { token, session: { id, tenantId: key.tenantId, keyName, expiresAt } };
  }

  /**
   * The principal and session of a live token whose key is live, else undefined (unknown, ended,
   * idle or too old, or its key revoked or expired). Pushes the idle expiry forward.
   */
  async verify(token: string): Promise<{ principal: Principal; session: SessionRecord } | undefined> {
    if (!looksLikeSessionToken(token)) return undefined;
    const now = this.clock.now();
    const nowDate = new Date(now);
    const row = await this.db
      .selectFrom('console_sessions')
      .innerJoin('api_keys', 'api_keys.id', 'console_sessions.api_key_id')
      .innerJoin('tenants', 'tenants.id', 'console_sessions.tenant_id')
      .select([
        'console_sessions.id',
        'console_sessions.tenant_id',
        'console_sessions.api_key_id',
        'console_sessions.idle_expires_at',
        'console_sessions.expires_at',
        'api_keys.name',
        'api_keys.role',
        'tenants.is_system',
      ])
      .where('console_sessions.token_hash', '=', digest(token))
      .where('console_sessions.expires_at', '>', nowDate)
      .where('console_sessions.idle_expires_at', '>', nowDate)
      .where('api_keys.revoked_at', 'is', null)
      .where((eb) => eb.or([eb('api_keys.expires_at', 'is', null), eb('api_keys.expires_at', '>', sql<Date>`now()`)]))
      .executeTakeFirst();
    if (!row) return undefined;
    const idleUntil = Math.min(now + this.limits.idleSeconds * 1000, row.expires_at.getTime());
    if (idleUntil - row.idle_expires_at.getTime() >= EXTEND_AFTER_MS) {
      await this.db
        .updateTable('console_sessions')
        .set({ idle_expires_at: new Date(idleUntil) })
        .where('id', '=', row.id)
        .execute();
    }
    return {
      principal: {
        tenantId: row.tenant_id,
        role: row.role,
        platformAdmin: row.is_system && row.role === 'admin',
        credential: { type: 'session', id: row.id, apiKeyId: row.api_key_id },
      },
      session: { id: row.id, tenantId: row.tenant_id, keyName: row.name, expiresAt: row.expires_at },
    };
  }

  /** Ends a session (signing out); ending one that is gone already is no error. */
  async end(id: string): Promise<void> {
    await this.db.deleteFrom('console_sessions').where('id', '=', id).execute();
  }
}
