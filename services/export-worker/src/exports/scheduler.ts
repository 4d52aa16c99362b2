/**
 * Spawns the exports of schedules: export k of a schedule covers
 * [start + k·h, start + (k+1)·h) and is created (CREATED, carrying source_bulk_export_id) 10
 * minutes after its end, so a schedule whose start lies in the past spawns its due intervals at
 * once. Every replica runs a scheduler: each spawn happens under the schedule's row lock, and the
 * unique key (source_bulk_export_id, interval_index) makes an interval spawn exactly once, whatever
 * the races or restarts. A cancelled schedule spawns nothing more; what it spawned stays.
 */
import { randomUUID } from 'node:crypto';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';
import { ExportStore, SpawnExistsError, type ExportRow } from './store.js';

/** How long after an interval's end its export is spawned (late runs have arrived by then). */
export const SPAWN_DELAY_MS = 10 * 60_000;

export interface ExportSchedulerOptions {
  store: ExportStore;
  logger: Logger;
  /** The clock of the passes and of what is due (tests move it). @default systemClock */
  clock?: Clock;
  /** How often to look for due intervals. @default 30000 */
  intervalMs?: number;
  /** Spawns per schedule per pass (a schedule far in the past catches up over a few passes). @default 100 */
  maxSpawnsPerPass?: number;
}

export class ExportScheduler {
  private readonly clock: Clock;
  private timer: Timer | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly options: ExportSchedulerOptions) {
    this.clock = options.clock ?? systemClock;
  }

  start(): void {
    this.timer = this.clock.setInterval(() => {
      this.running ??= this.tick()
        .then(() => undefined)
        .catch((error: unknown) => this.options.logger.error({ err: error }, 'spawning scheduled exports failed'))
        .finally(() => (this.running = undefined));
    }, this.options.intervalMs ?? 30_000);
  }

  async stop(): Promise<void> {
    this.timer?.cancel();
    await this.running;
  }

  /** One pass over the due schedules; returns the exports it spawned (tests call it directly). */
  async tick(): Promise<ExportRow[]> {
    const now = new Date(this.clock.now());
    const spawned: ExportRow[] = [];
    for (const due of await this.options.store.dueSchedules(new Date(now.getTime() - SPAWN_DELAY_MS))) {
      await this.options.store.withSchedule(due.id, async (schedule, tx) => {
        const hourMs = 3_600_000 * schedule.interval_hours!;
        let k = schedule.next_interval_index;
        for (let n = 0; n < (this.options.maxSpawnsPerPass ?? 100); n++, k++) {
          const start = new Date(schedule.start_time.getTime() + k * hourMs);
          const end = new Date(start.getTime() + hourMs);
          if (end.getTime() + SPAWN_DELAY_MS > now.getTime()) break;
          try {
            spawned.push(
              await this.options.store.insert(
                {
                  id: randomUUID(),
                  tenant_id: schedule.tenant_id,
                  destination_id: schedule.destination_id,
                  session_id: schedule.session_id,
                  start_time: start,
                  end_time: end,
                  format_version: schedule.format_version,
                  filter: schedule.filter,
                  export_fields: schedule.export_fields,
                  interval_hours: null,
                  status: 'CREATED',
                  source_bulk_export_id: schedule.id,
                  interval_index: k,
                  created_at: now,
                },
                tx,
              ),
            );
          } catch (error) {
            if (!(error instanceof SpawnExistsError)) throw error;
          }
        }
        return k;
      });
    }
    if (spawned.length)
      this.options.logger.info(
        { exports: spawned.map((e) => ({ id: e.id, schedule: e.source_bulk_export_id, interval: e.interval_index })) },
        'spawned scheduled exports',
      );
    return spawned;
  }
}
