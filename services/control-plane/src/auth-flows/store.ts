/**
 * Login flows in Postgres (the control plane's schema). Every state change is one SQL statement,
 * so concurrent approvers and waiters (on any number of control-plane replicas) cannot complete
 * a flow twice or both receive its token. Completing a flow NOTIFYs the flow's waiters.
 */
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock } from '@berth/clock';
import { ConflictError, NotFoundError } from '@berth/errors';
import { sql, type Kysely, type Selectable } from '@berth/db';
import { digestId, generateApprovalId, generateAuthId, looksLikeApprovalId, looksLikeAuthId } from './secrets.js';
import type { AuthFlowTables, AuthFlowsTable } from './tables.js';

export type FlowStatus = 'pending' | 'completed' | 'expired';

/** A flow as other code sees it: never its secrets or token. */
export interface FlowRecord {
  status: FlowStatus;
  clientName: string;
  tenantId: string | null;
  createdAt: Date;
  expiresAt: Date;
  completedAt: Date | null;
  tokenClaimed: boolean;
}

/** What one claim attempt found. */
export type ClaimResult =
  /** This caller collected the token; nobody else ever will. */
  | { kind: 'token'; token: string }
  /** Completed, but the token went to an earlier waiter. */
  | { kind: 'claimed' }
  | { kind: 'pending'; expiresAt: Date }
  /** Unknown or expired. */
  | { kind: 'missing' };

export interface AuthFlowStoreOptions {
  /** The NOTIFY channel completions are announced on; payload: the hex digest of the auth_id. */
  channel: string;
  /**
   * How long expired flows are kept (as `expired`, without token) before the sweep deletes them.
   * @default 86400
   */
  retentionSeconds?: number;
  /** The time flows start, expire and complete at (not the database's `now()`). @default systemClock */
  clock?: Clock;
}

interface FlowRow {
  status: FlowStatus;
  client_name: string;
  tenant_id: string | null;
  created_at: Date;
  expires_at: Date;
  completed_at: Date | null;
  claimed_at: Date | null;
  expired: boolean;
}

const flowColumns = ['status', 'client_name', 'tenant_id', 'created_at', 'expires_at', 'completed_at', 'claimed_at'] as const;

function recordOf(row: Pick<Selectable<AuthFlowsTable>, (typeof flowColumns)[number]> & { expired: boolean }): FlowRecord {
  return {
    // The sweep marks expired flows only now and then; the clock decides before that.
    status: row.expired ? 'expired' : row.status,
    clientName: row.client_name,
    tenantId: row.tenant_id,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    completedAt: row.completed_at,
    tokenClaimed: row.claimed_at !== null,
  };
}

export class AuthFlowStore {
  private readonly retentionSeconds: number;
  private readonly clock: Clock;

  constructor(
    private readonly db: Kysely<AuthFlowTables>,
    private readonly options: AuthFlowStoreOptions,
  ) {
    this.retentionSeconds = options.retentionSeconds ?? 86_400;
    this.clock = options.clock ?? systemClock;
  }

  /** The clock's time, as a query parameter. */
  private now(): Date {
    return new Date(this.clock.now());
  }

  /** Creates a pending flow; its two secrets exist only in the returned value. */
  async create(input: { ttlSeconds: number; clientName: string }): Promise<{ authId: string; approvalId: string; flow: FlowRecord }> {
    const authId = generateAuthId();
    const approvalId = generateApprovalId();
    const now = this.now();
    const row = await this.db
      .insertInto('auth_flows')
      .values({
        id: randomUUID(),
        auth_id_hash: digestId(authId),
        approval_id_hash: digestId(approvalId),
        client_name: input.clientName,
        created_at: now,
        expires_at: new Date(now.getTime() + input.ttlSeconds * 1000),
      })
      .returning([...flowColumns, sql<boolean>`false`.as('expired')])
      .executeTakeFirstOrThrow();
    return { authId, approvalId, flow: recordOf(row) };
  }

  async getByAuthId(authId: string): Promise<FlowRecord | undefined> {
    return looksLikeAuthId(authId) ? this.get('auth_id_hash', digestId(authId)) : undefined;
  }

  async getByApprovalId(approvalId: string): Promise<FlowRecord | undefined> {
    return looksLikeApprovalId(approvalId) ? this.get('approval_id_hash', digestId(approvalId)) : undefined;
  }

  /**
   * Attaches the token to a pending, unexpired flow and notifies its waiters (NOTIFY is sent when
   * the statement commits). NotFoundError for unknown or expired flows, ConflictError when the
   * flow was already completed.
   */
  async complete(input: { approvalId: string; token: string; tenantId: string | null }): Promise<FlowRecord> {
    if (looksLikeApprovalId(input.approvalId)) {
      const hash = digestId(input.approvalId);
      const now = this.now();
      const { rows } = await sql<FlowRow>`
        WITH done AS (
          UPDATE auth_flows
             SET status = 'completed', token = ${input.token}, tenant_id = ${input.tenantId}, completed_at = ${now}
           WHERE approval_id_hash = ${hash} AND status = 'pending' AND expires_at > ${now}
          RETURNING auth_id_hash, status, client_name, tenant_id, created_at, expires_at, completed_at, claimed_at
        )
        SELECT status, client_name, tenant_id, created_at, expires_at, completed_at, claimed_at, false AS expired,
               pg_notify(${this.options.channel}, encode(auth_id_hash, 'hex'))
          FROM done`.execute(this.db);
      if (rows[0]) return recordOf(rows[0]);
      const existing = await this.get('approval_id_hash', hash);
      if (existing?.status === 'completed') throw new ConflictError('This login was already approved');
    }
    throw new NotFoundError('Login flow not found or expired');
  }

  /**
   * Hands out the token of a completed flow, once: the first caller gets it and the row forgets
   * it in the same statement. Expired flows are `missing`, whatever their state.
   */
  async claim(authId: string): Promise<ClaimResult> {
    if (!looksLikeAuthId(authId)) return { kind: 'missing' };
    const hash = digestId(authId);
    const now = this.now();
    // RETURNING shows updated rows, so the token comes from the locked pre-update row `old`. The
    // outer SELECT sees the row as it was before the CTE; `claimed.token` is set only for the
    // caller whose UPDATE won (a concurrent loser finds `claimed_at` set once it gets the lock).
    const { rows } = await sql<{ status: FlowStatus; expires_at: Date; expired: boolean; token: string | null }>`
      WITH claimed AS (
        UPDATE auth_flows f SET token = NULL, claimed_at = ${now}
          FROM (SELECT id, token FROM auth_flows
                 WHERE auth_id_hash = ${hash} AND status = 'completed' AND claimed_at IS NULL AND expires_at > ${now}
                   FOR UPDATE) old
         WHERE f.id = old.id AND f.claimed_at IS NULL
        RETURNING f.id, old.token
      )
      SELECT f.status, f.expires_at, f.expires_at <= ${now} AS expired, c.token
        FROM auth_flows f LEFT JOIN claimed c ON c.id = f.id
       WHERE f.auth_id_hash = ${hash}`.execute(this.db);
    const row = rows[0];
    if (!row || row.expired || row.status === 'expired') return { kind: 'missing' };
    if (row.token !== null) return { kind: 'token', token: row.token };
    if (row.status === 'completed') return { kind: 'claimed' };
    return { kind: 'pending', expiresAt: row.expires_at };
  }

  /**
   * Marks flows past their expiry as expired, forgets tokens nobody collected, and deletes flows
   * expired longer than the retention. Safe to run from several replicas at once.
   */
  async sweep(): Promise<{ expired: number; deleted: number }> {
    const now = this.now();
    const expired = await this.db
      .updateTable('auth_flows')
      .set({ status: sql<'expired'>`CASE WHEN status = 'pending' THEN 'expired' ELSE status END`, token: null })
      .where('expires_at', '<=', now)
      .where((eb) => eb.or([eb('status', '=', 'pending'), eb('token', 'is not', null)]))
      .executeTakeFirst();
    const deleted = await this.db
      .deleteFrom('auth_flows')
      .where('expires_at', '<', new Date(now.getTime() - this.retentionSeconds * 1000))
      .executeTakeFirst();
    return { expired: Number(expired.numUpdatedRows), deleted: Number(deleted.numDeletedRows) };
  }

  private async get(column: 'auth_id_hash' | 'approval_id_hash', hash: Buffer): Promise<FlowRecord | undefined> {
    const row = await this.db
      .selectFrom('auth_flows')
      .select([...flowColumns, sql<boolean>`expires_at <= ${this.now()}`.as('expired')])
      .where(column, '=', hash)
      .executeTakeFirst();
    return row && recordOf(row);
  }
}
