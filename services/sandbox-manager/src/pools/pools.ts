/**
 * Warm pools: per template, `replicas` ready instances in reserve, within the tenant's quota (they
 * count as its sandboxes). A sandbox created from the template takes one (`take`: the member row is
 * deleted under SKIP LOCKED in the sandbox's own transaction, so two claims never get the same
 * member; then `confirm`: the driver checks it is alive) and the keeper refills the pool. Members of
 * an older template version are never handed out and are replaced.
 */
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import { isUniqueViolation, sql, type Kysely, type Selectable, type Transaction } from '@berth/db';
import { ConflictError, NotFoundError } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { TemplateRow, Templates } from '../catalog/templates.js';
import type { SandboxDriver } from '../drivers/driver.js';
import { poolMemberLifecycle, type PoolMemberStatus } from '../lifecycle.js';
import { effectiveResources, INSTANCE_LABELS, instanceSpec, newInstanceName, type InstanceSpecDeps } from '../sandboxes/instance-spec.js';
import { QuotaExceededError, type TenantQuotas } from '../sandboxes/quota.js';
import type { PoolMembersTable, PoolsTable, SandboxTables } from '../tables.js';

export type PoolRow = Selectable<PoolsTable>;
type PoolMemberRow = Selectable<PoolMembersTable>;
export interface PoolView extends PoolRow {
  template_name: string;
  ready_replicas: number;
}

/**
 * A claim's refill waits this long: a member's create (~150 ms of engine work) would otherwise
 * compete for the CPU with the claimed sandbox's first command (measured: +10–15 ms on 2 cores).
 */
const REFILL_AFTER_CLAIM_MS = 250;

/** Most members one pool keeps. */
export const MAX_REPLICAS = 100;

export interface PoolsDeps extends InstanceSpecDeps {
  db: Kysely<SandboxTables>;
  driver: SandboxDriver;
  templates: Templates;
  logger: Logger;
  quotas: TenantQuotas;
  /**
   * How often the keeper checks every pool.
   * @default 2000
   */
  intervalMs?: number;
  /** @default systemClock */
  clock?: Clock;
}

export class Pools {
  #timer: Timer | undefined;
  #pass: Promise<void> = Promise.resolve();
  /** Member creations in flight (awaited on close). */
  readonly #creating = new Set<Promise<void>>();
  readonly #clock: Clock;

  constructor(private readonly deps: PoolsDeps) {
    this.#clock = deps.clock ?? systemClock;
  }

  async create(tenantId: string, name: string, templateName: string, replicas: number): Promise<PoolView> {
    const template = await this.deps.templates.get({ tenantId, kind: 'template', name: templateName });
    if (template.volumes.length > 0)
      throw new ConflictError(`template "${templateName}" mounts volumes; a pool's members would share them, so it cannot be pooled`);
    try {
      await this.deps.db.insertInto('pools').values({ id: randomUUID(), tenant_id: tenantId, name, template_id: template.id, replicas }).execute();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a pool named "${name}" already exists`, { cause: error });
      throw error;
    }
    this.kick();
    return this.get(tenantId, name);
  }

  async list(tenantId: string): Promise<PoolView[]> {
    return this.views(tenantId);
  }

  async get(tenantId: string, name: string): Promise<PoolView> {
    const [pool] = await this.views(tenantId, name);
    if (!pool) throw new NotFoundError(`pool "${name}" not found`);
    return pool;
  }

  async update(tenantId: string, name: string, replicas: number): Promise<PoolView> {
    const updated = await this.deps.db
      .updateTable('pools')
      .set({ replicas, updated_at: new Date(this.#clock.now()) })
      .where('tenant_id', '=', tenantId)
      .where('name', '=', name)
      .executeTakeFirst();
    if (updated.numUpdatedRows === 0n) throw new NotFoundError(`pool "${name}" not found`);
    this.kick();
    return this.get(tenantId, name);
  }

  /** Deletes a pool and its unclaimed members (sandboxes already served from it stay). */
  async delete(tenantId: string, name: string): Promise<void> {
    const pool = await this.deps.db.selectFrom('pools').select('id').where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
    if (!pool) throw new NotFoundError(`pool "${name}" not found`);
    const members = await this.deps.db.deleteFrom('pool_members').where('pool_id', '=', pool.id).returning('instance').execute();
    await this.deps.db.deleteFrom('pools').where('id', '=', pool.id).execute();
    await Promise.all(members.map((m) => this.removeInstance(m.instance)));
  }

  /**
   * Within a sandbox's create (its quota transaction): takes a ready member of the template's
   * current version out of its pool, or undefined. The sandbox's record names the member's
   * instance in the same transaction, so that the instance is never without a record.
   */
  async take(trx: Transaction<SandboxTables>, template: TemplateRow): Promise<{ instance: string; poolName: string } | undefined> {
    const member = await trx
      .deleteFrom('pool_members')
      .where('instance', '=', (eb) =>
        eb
          .selectFrom('pool_members as m')
          .innerJoin('pools as p', 'p.id', 'm.pool_id')
          .select('m.instance')
          .where('p.template_id', '=', template.id)
          .where('m.status', '=', 'ready')
          .where('m.template_version', '=', template.version)
          .orderBy('m.created_at')
          .limit(1)
          .forUpdate()
          .skipLocked(),
      )
      .returning(['instance', 'pool_id'])
      .executeTakeFirst();
    if (!member) return undefined;
    const pool = await trx.selectFrom('pools').select('name').where('id', '=', member.pool_id).executeTakeFirst();
    return { instance: member.instance, poolName: pool?.name ?? '' };
  }

  /**
   * After `take`: whether the member is alive and now the sandbox's (the driver checks it answers
   * and marks it claimed). One that is not is removed; the caller starts the sandbox cold.
   */
  async confirm(instance: string, sandboxId: string): Promise<boolean> {
    this.kick(REFILL_AFTER_CLAIM_MS);
    if (await this.deps.driver.claim(instance, sandboxId).catch(() => false)) return true;
    this.deps.logger.warn({ instance }, 'a warm-pool member failed its claim check; removed');
    await this.removeInstance(instance);
    return false;
  }

  /** How many warm-pool members of every pool are in each status; statuses without any left out. */
  async membersByStatus(): Promise<Record<string, number>> {
    const rows = await this.deps.db
      .selectFrom('pool_members')
      .select((eb) => ['status', eb.fn.countAll<string>().as('count')])
      .groupBy('status')
      .execute();
    return Object.fromEntries(rows.map((row) => [row.status, Number(row.count)]));
  }

  /**
   * After a restart: members a stopped manager left creating, and ready ones whose instance no
   * longer runs, are removed (the next pass makes new ones).
   */
  async resume(): Promise<void> {
    const members = await this.deps.db.selectFrom('pool_members').select(['instance', 'status']).execute();
    for (const member of members) {
      const alive = member.status === 'ready' && (await this.deps.driver.inspect(member.instance).catch(() => undefined))?.state === 'running';
      if (alive) continue;
      const gone = await this.deps.db.deleteFrom('pool_members').where('instance', '=', member.instance).where('status', '=', member.status).executeTakeFirst();
      if (gone.numDeletedRows > 0n) await this.removeInstance(member.instance);
    }
  }

  /** Removes every member (their pools stay and are refilled on the next start). */
  async removeMembers(): Promise<void> {
    const members = await this.deps.db.deleteFrom('pool_members').returning('instance').execute();
    for (const member of members) await this.removeInstance(member.instance);
  }

  start(): void {
    const tick = () => {
      this.#pass = this.#pass.then(() => this.refill()).catch((error: unknown) => this.deps.logger.error({ err: error }, 'warm-pool pass failed'));
      this.#timer = this.#clock.setTimeout(tick, this.deps.intervalMs ?? 2000);
    };
    tick();
  }

  async stop(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#pass;
    await Promise.allSettled([...this.#creating]);
  }

  /** Runs a pass soon (after a claim or a change), after `delayMs`. */
  kick(delayMs = 0): void {
    if (this.#timer === undefined) return;
    const run = () => {
      this.#pass = this.#pass.then(() => this.refill()).catch((error: unknown) => this.deps.logger.error({ err: error }, 'warm-pool pass failed'));
    };
    if (delayMs === 0) run();
    else this.#clock.setTimeout(run, delayMs);
  }

  /** One pass: drop stale, failed and surplus members; create the missing ones. */
  async refill(): Promise<void> {
    if (await this.deps.driver.unavailableReason()) return;
    const pools = await this.deps.db.selectFrom('pools').selectAll().execute();
    for (const pool of pools) {
      const template = await this.deps.templates.byId(pool.template_id);
      if (!template) continue;
      const members = await this.deps.db.selectFrom('pool_members').selectAll().where('pool_id', '=', pool.id).orderBy('created_at').execute();
      const current = members.filter((m) => m.template_version === template.version && m.status !== 'failed');
      const drop = [
        ...members.filter((m) => !current.includes(m) && m.status !== 'creating'),
        ...current.filter((m) => m.status === 'ready').slice(0, Math.max(0, current.length - pool.replicas)),
      ];
      for (const member of drop) {
        const gone = await this.deps.db.deleteFrom('pool_members').where('instance', '=', member.instance).executeTakeFirst();
        if (gone.numDeletedRows > 0n) await this.removeInstance(member.instance);
      }
      if (template.status !== 'ready') continue;
      for (let i = current.length; i < pool.replicas; i++) {
        const instance = await this.reserveMember(pool, template);
        if (!instance) break;
        this.createMember(instance, pool, template);
      }
    }
  }

  /**
   * A new member's record, within its tenant's quota (members are running sandboxes in reserve);
   * undefined when the quota has no room for it (the pool stays short until it has).
   */
  private async reserveMember(pool: PoolRow, template: TemplateRow): Promise<string | undefined> {
    const instance = newInstanceName();
    const { cpuMillis, memoryBytes } = effectiveResources(template, {}, this.deps.limits);
    try {
      await this.deps.quotas.locked(pool.tenant_id, async (trx) => {
        await this.deps.quotas.check(trx, pool.tenant_id, { sandboxes: 1, cpuMillis, memoryBytes });
        await trx
          .insertInto('pool_members')
          .values({
            instance,
            pool_id: pool.id,
            template_version: template.version,
            status: poolMemberLifecycle.initial[0]!,
            vcpus: cpuMillis / 1000,
            mem_bytes: memoryBytes,
          })
          .execute();
      });
      return instance;
    } catch (error) {
      if (!(error instanceof QuotaExceededError)) throw error;
      this.deps.logger.debug({ pool: pool.id, reason: error.message }, 'a warm pool stays short: its tenant is at its quota');
      return undefined;
    }
  }

  private createMember(instance: string, pool: PoolRow, template: TemplateRow): void {
    const work = (async () => {
      try {
        const spec = await instanceSpec(this.deps, instance, template, { labels: { [INSTANCE_LABELS.pool]: pool.id } });
        await this.deps.driver.create(spec);
        // Not moved: the pool was deleted or shrunk while it started.
        if (!(await this.moveMember(instance, 'ready', { ready_at: new Date(this.#clock.now()) }))) await this.removeInstance(instance);
      } catch (error) {
        this.deps.logger.warn({ err: error, pool: pool.id, instance }, 'a warm-pool member failed to start');
        await this.moveMember(instance, 'failed', { status_message: error instanceof Error ? error.message : String(error) });
      }
    })().catch((error: unknown) => this.deps.logger.error({ err: error, instance }, 'warm-pool bookkeeping failed'));
    this.#creating.add(work);
    void work.finally(() => this.#creating.delete(work));
  }

  /**
   * The one status change of a pool member: to `to` if the lifecycle allows it from the member's
   * status. False when it did not move (the member is gone, or already in a state that cannot move
   * there).
   */
  private async moveMember(instance: string, to: PoolMemberStatus, values: Partial<Pick<PoolMemberRow, 'status_message' | 'ready_at'>> = {}): Promise<boolean> {
    const moved = await this.deps.db
      .updateTable('pool_members')
      .set({ ...values, status: to })
      .where('instance', '=', instance)
      .where('status', 'in', poolMemberLifecycle.sourcesOf(to))
      .executeTakeFirst();
    return moved.numUpdatedRows > 0n;
  }

  private async removeInstance(instance: string): Promise<void> {
    await this.deps.driver
      .remove(instance)
      .catch((error: unknown) => this.deps.logger.warn({ err: error, instance }, 'removing a warm-pool member failed; the reconciler removes it later'));
  }

  private async views(tenantId: string, name?: string): Promise<PoolView[]> {
    let query = this.deps.db
      .selectFrom('pools as p')
      .innerJoin('templates as t', 't.id', 'p.template_id')
      .selectAll('p')
      .select('t.name as template_name')
      .select((eb) =>
        eb
          .selectFrom('pool_members as m')
          .select(sql<number>`count(*)::int`.as('n'))
          .whereRef('m.pool_id', '=', 'p.id')
          .where('m.status', '=', 'ready')
          .whereRef('m.template_version', '=', 't.version')
          .as('ready_replicas'),
      )
      .where('p.tenant_id', '=', tenantId);
    if (name !== undefined) query = query.where('p.name', '=', name);
    const rows = await query.orderBy('p.name').execute();
    return rows.map((row) => ({ ...row, ready_replicas: Number(row.ready_replicas ?? 0) }));
  }
}
