/**
 * Removes instances (containers, pods) of this platform that no live record owns, at start, every
 * `intervalMs` and whenever the engine comes back: what a delete left behind while the engine was
 * down, what a crash left between a removal and its record, a member of a pool deleted meanwhile.
 *
 * Only this platform's: instances carry INSTANCE_LABELS.platform (an id kept in this platform's
 * database), and an engine shared with other platforms, or holding instances made before the label,
 * keeps theirs. An instance whose sandbox is deleted (a tombstone) goes at once. One with no record
 * at all may have its record on the way (a warm-pool member is between pool and sandbox for a
 * moment): it goes only once it was seen without one twice, `graceMs` apart. Records are written
 * before their instance is made, so an instance being created always has one.
 */
import type { Kysely } from '@berth/db';
import { systemClock, type Clock } from '@berth/clock';
import type { Logger } from '@berth/log';
import type { SandboxDriver } from '../drivers/driver.js';
import { Periodic } from '../periodic.js';
import type { SandboxTables } from '../tables.js';
import { INSTANCE_LABELS } from './instance-spec.js';

export interface ReconcilerOptions {
  db: Kysely<SandboxTables>;
  driver: SandboxDriver;
  logger: Logger;
  /** @default systemClock */
  clock?: Clock;
  /** This platform's id (see INSTANCE_LABELS.platform). */
  platformId: string;
  /** @default 30000 */
  intervalMs?: number;
  /** @default 30000 */
  graceMs?: number;
}

export class Reconciler {
  /** Instances seen without any record, and when first (ms). */
  readonly #suspects = new Map<string, number>();
  readonly #periodic: Periodic;

  constructor(private readonly options: ReconcilerOptions) {
    this.#periodic = new Periodic(() => this.reconcile(), {
      intervalMs: options.intervalMs ?? 30_000,
      logger: options.logger,
      what: 'sandbox reconciler pass',
      clock: options.clock,
    });
  }

  /** A pass every interval (the manager runs one itself whenever the engine is found up: at start, after an outage). */
  start(): void {
    this.#periodic.start();
  }

  async stop(): Promise<void> {
    await this.#periodic.stop();
  }

  /** One pass (passes never overlap); an engine that does not answer ends it quietly. */
  pass(): Promise<void> {
    return this.#periodic.run();
  }

  private async reconcile(): Promise<void> {
    const { db, driver, logger, platformId } = this.options;
    let instances: string[];
    try {
      instances = await driver.list({ [INSTANCE_LABELS.platform]: platformId });
    } catch (error) {
      logger.debug({ err: error }, 'the sandbox engine does not answer; reconciling later');
      return;
    }
    const seen = new Set(instances);
    for (const instance of this.#suspects.keys()) if (!seen.has(instance)) this.#suspects.delete(instance);
    if (instances.length === 0) return;
    const sandboxes = await db.selectFrom('sandboxes').select(['instance', 'deleted_at', 'deleted_reason']).where('instance', 'in', instances).execute();
    const members = await db.selectFrom('pool_members').select('instance').where('instance', 'in', instances).execute();
    const live = new Set([...sandboxes.filter((s) => s.deleted_at === null).map((s) => s.instance), ...members.map((m) => m.instance)]);
    const deleted = new Map(sandboxes.filter((s) => s.deleted_at !== null).map((s) => [s.instance, s.deleted_reason]));
    const now = (this.options.clock ?? systemClock).now();
    for (const instance of instances) {
      if (live.has(instance)) {
        this.#suspects.delete(instance);
        continue;
      }
      let why: string;
      if (deleted.has(instance)) why = `its sandbox was deleted (${deleted.get(instance) ?? 'deleted'})`;
      else {
        const since = this.#suspects.get(instance);
        if (since === undefined) this.#suspects.set(instance, now);
        if (since === undefined || now - since < (this.options.graceMs ?? 30_000)) continue;
        why = 'no sandbox or warm-pool member owns it';
      }
      try {
        await driver.remove(instance);
        this.#suspects.delete(instance);
        logger.info({ instance, why }, 'removed a sandbox instance without a live record');
      } catch (error) {
        logger.warn({ err: error, instance }, 'removing a sandbox instance without a live record failed; trying again at the next pass');
      }
    }
  }
}
