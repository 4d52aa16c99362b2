/**
 * Per-tenant quotas of sandboxes. What counts:
 * - the number of sandboxes: every live one (provisioning, ready, stopped, failed: each keeps its
 *   files) plus the tenant's warm-pool members that are being made or ready;
 * - memory and CPU: sandboxes that run or are starting (provisioning, ready) and those pool
 *   members; a stopped or failed sandbox holds none, so starting one again is checked too.
 * A deleted sandbox counts no more (its container may still be on its way out).
 *
 * Every change of what a tenant uses (create, start, a new pool member) runs in a transaction that
 * holds the tenant's advisory lock, checks and writes: concurrent creates take turns, so that a
 * race of many never goes over. Refusals are 429s (ResourceExhaustedError) whose words the
 * `langsmith/sandbox` client reads the kind of quota from (`sandbox_count`, `memory`, `cpu`).
 */
import { sql, type Kysely, type Transaction } from '@berth/db';
import { ResourceExhaustedError } from '@berth/errors';
import type { SandboxTables } from '../tables.js';
import { formatResource } from './limits.js';

const GiB = 1024 ** 3;

export interface SandboxQuota {
  /** Live sandboxes of one tenant, warm-pool members included. @default 50 */
  sandboxes: number;
  /** Memory of one tenant's running sandboxes and warm-pool members, in bytes. @default 64 GiB */
  memoryBytes: number;
  /** CPU of one tenant's running sandboxes and warm-pool members, in millicores. @default 32000 */
  cpuMillis: number;
}

export const DEFAULT_QUOTA: SandboxQuota = { sandboxes: 50, memoryBytes: 64 * GiB, cpuMillis: 32_000 };

/** What a tenant uses, or what a change adds to it. */
export interface Usage {
  sandboxes: number;
  memoryBytes: number;
  cpuMillis: number;
}

/** A tenant would go over one of its quotas (429). */
export class QuotaExceededError extends ResourceExhaustedError {}

/** Sandbox statuses that hold memory and CPU. */
const RUNNING = ['provisioning', 'ready'] as const;

export class TenantQuotas {
  constructor(
    private readonly db: Kysely<SandboxTables>,
    private readonly quota: SandboxQuota,
  ) {}

  /** Runs `work` in a transaction holding the tenant's quota lock (see the module comment). */
  async locked<T>(tenantId: string, work: (trx: Transaction<SandboxTables>) => Promise<T>): Promise<T> {
    return this.db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`berth.sandbox-quota.${tenantId}`}, 0))`.execute(trx);
      return work(trx);
    });
  }

  /** Within `locked`: throws QuotaExceededError unless the tenant may add `more`. */
  async check(trx: Transaction<SandboxTables>, tenantId: string, more: Usage): Promise<void> {
    const used = await this.usage(trx, tenantId);
    const { quota } = this;
    if (more.sandboxes > 0 && used.sandboxes + more.sandboxes > quota.sandboxes) {
      throw new QuotaExceededError(
        `Sandbox count quota reached: this tenant may have ${quota.sandboxes} sandboxes (stopped ones and warm-pool members included) and has ${used.sandboxes}; delete one first`,
      );
    }
    const memory = used.memoryBytes + more.memoryBytes;
    if (more.memoryBytes > 0 && memory > quota.memoryBytes) {
      throw new QuotaExceededError(
        `Memory quota exceeded: this tenant's running sandboxes and warm-pool members would use ${formatResource('memoryBytes', memory)} of memory, ` +
          `its quota is ${formatResource('memoryBytes', quota.memoryBytes)}; stop or delete a sandbox first`,
      );
    }
    const cpu = used.cpuMillis + more.cpuMillis;
    if (more.cpuMillis > 0 && cpu > quota.cpuMillis) {
      throw new QuotaExceededError(
        `CPU quota exceeded: this tenant's running sandboxes and warm-pool members would use ${formatResource('cpuMillis', cpu)} CPUs, ` +
          `its quota is ${formatResource('cpuMillis', quota.cpuMillis)}; stop or delete a sandbox first`,
      );
    }
  }

  /** What a tenant uses now (see the module comment). */
  async usage(db: Kysely<SandboxTables>, tenantId: string): Promise<Usage> {
    const { rows } = await sql<{ sandboxes: number; memory: string; millicores: string }>`
      WITH held AS (
        SELECT 1 AS n,
               CASE WHEN status IN (${sql.join(RUNNING)}) THEN coalesce(mem_bytes, 0) ELSE 0 END AS memory,
               CASE WHEN status IN (${sql.join(RUNNING)}) THEN coalesce(vcpus, 0) ELSE 0 END AS cpus
          FROM sandboxes WHERE tenant_id = ${tenantId} AND deleted_at IS NULL
        UNION ALL
        SELECT 1, m.mem_bytes, m.vcpus
          FROM pool_members m JOIN pools p ON p.id = m.pool_id
         WHERE p.tenant_id = ${tenantId} AND m.status <> 'failed'
      )
      SELECT count(*)::int AS sandboxes, coalesce(sum(memory), 0)::text AS memory, round(coalesce(sum(cpus), 0) * 1000)::text AS millicores FROM held`.execute(
      db,
    );
    const row = rows[0]!;
    return { sandboxes: row.sandboxes, memoryBytes: Number(row.memory), cpuMillis: Number(row.millicores) };
  }
}
