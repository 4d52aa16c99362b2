/**
 * Enforces sandbox TTLs from the times in Postgres (never earlier): a ready sandbox with no
 * activity and no running command for `idle_ttl_seconds` is stopped; a stopped (or failed) one is
 * deleted `delete_after_stop_seconds` after it stopped; any is deleted at `expires_at`
 * (`ttl_seconds` after creation). It also notices instances that died by themselves (out of
 * memory, killed) and marks their sandboxes failed with the reason. Every action is logged with
 * its reason, and a deleted sandbox's GET says why.
 */
import { systemClock, type Clock } from '@berth/clock';
import type { Logger } from '@berth/log';
import type { SandboxDriver } from '../drivers/driver.js';
import { Periodic } from '../periodic.js';
import type { Sandboxes } from './sandboxes.js';
import { TOMBSTONE_DAYS, type SandboxRow } from './store.js';

export interface ReaperOptions {
  sandboxes: Sandboxes;
  driver: SandboxDriver;
  /** Commands running in a sandbox (they keep it from being idle). */
  runningCommands: (sandboxId: string) => number;
  logger: Logger;
  /** @default systemClock */
  clock?: Clock;
  /**
   * How often TTLs are checked.
   * @default 5000
   */
  intervalMs?: number;
}

const seconds = (value: string) => Number(value);

export class Reaper {
  readonly #periodic: Periodic;

  constructor(private readonly options: ReaperOptions) {
    this.#periodic = new Periodic(() => this.pass(), {
      intervalMs: options.intervalMs ?? 5000,
      logger: options.logger,
      what: 'sandbox reaper pass',
      clock: options.clock,
    });
  }

  start(): void {
    this.#periodic.start();
  }

  async stop(): Promise<void> {
    await this.#periodic.stop();
  }

  /** One check of every live sandbox. */
  async pass(): Promise<void> {
    const { sandboxes, clock = systemClock } = this.options;
    const now = clock.now();
    for (const row of await sandboxes.store.inStatus(['ready', 'stopped', 'failed'])) {
      const ttl = seconds(row.ttl_seconds);
      if (row.expires_at && row.expires_at.getTime() <= now) {
        await this.act(row, () => sandboxes.remove(row, `its ttl_seconds (${ttl}) passed`));
        continue;
      }
      if (row.status === 'ready') await this.checkReady(row, now);
      else {
        const after = seconds(row.delete_after_stop_seconds);
        const since = (row.stopped_at ?? row.updated_at).getTime();
        if (after > 0 && since + after * 1000 <= now) {
          await this.act(row, () => sandboxes.remove(row, `it was ${row.status} for delete_after_stop_seconds (${after})`));
        }
      }
    }
    await sandboxes.store.purgeTombstones(new Date(now - TOMBSTONE_DAYS * 86_400_000));
  }

  private async checkReady(row: SandboxRow, now: number): Promise<void> {
    const { sandboxes, driver, runningCommands } = this.options;
    // The pass's list is old by now, and an instance seen mid-stop or mid-start must not fail its
    // sandbox: one under way is busy; one that ran between inspect and move changed updated_at.
    const fresh = await sandboxes.store.byId(row.id);
    if (fresh?.status !== 'ready') return;
    row = fresh;
    const state = await driver.inspect(row.instance).catch(() => undefined);
    if (state && state.state !== 'running') {
      if (sandboxes.busy(row.id)) return;
      const reason = state.state === 'failed' ? state.reason : state.state === 'missing' ? 'its instance disappeared' : 'its instance stopped by itself';
      await this.act(row, () => sandboxes.store.move(row.id, 'failed', { status_message: reason }, { unchangedSince: fresh.updated_at }));
      return;
    }
    const idle = seconds(row.idle_ttl_seconds);
    if (idle <= 0 || row.last_activity_at.getTime() + idle * 1000 > now) return;
    if (runningCommands(row.id) > 0) {
      await sandboxes.store.touch(row.id, new Date(now));
      return;
    }
    await this.act(row, () => sandboxes.stop({ tenantId: row.tenant_id, id: row.id }, `stopped after idle_ttl_seconds (${idle}) without activity`));
  }

  /** An action lost to a race (deleted or changed meanwhile) is fine; anything else is logged. */
  private async act(row: SandboxRow, action: () => Promise<unknown>): Promise<void> {
    try {
      await action();
    } catch (error) {
      this.options.logger.warn({ err: error, sandbox: row.id }, 'sandbox reaper action did not apply');
    }
  }
}
