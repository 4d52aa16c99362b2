/**
 * THE lifecycles of an export and of an export run: every status and the moves allowed from it.
 * The export store performs every status change through one function per entity
 * (`ExportStore.moveExport`, `ExportStore.moveRun`) checked against these tables; the wire enums
 * (`berth.exportworker.v1.ExportStatus`, `ExportRunStatus`) name the same states.
 *
 * A schedule (an export with interval_hours) is SCHEDULED for its whole life: it exports nothing
 * itself, spawns one CREATED export per interval, and ends only by being CANCELLED. Upstream calls
 * this state IntervalScheduled; the wire uses the capitalisation of the interface text.
 */
import { defineLifecycle, wireEnum, type Lifecycle } from '@berth/lifecycle';
import { ExportRunStatus as WireExportRunStatus, ExportStatus as WireExportStatus } from '@berth/proto';

export const exportLifecycle = defineLifecycle('export', {
  /** Waiting for a worker, or for a slot of its tenant's concurrent-export limit. */
  CREATED: { initial: true, to: ['RUNNING', 'CANCELLED', 'TIMEDOUT'] },
  RUNNING: { to: ['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEDOUT'] },
  COMPLETED: {},
  FAILED: { failed: true },
  CANCELLED: {},
  TIMEDOUT: { failed: true },
  /** A schedule: spawns exports until cancelled. */
  SCHEDULED: { initial: true, to: ['CANCELLED'] },
});

export type ExportStatus = typeof exportLifecycle extends Lifecycle<infer S> ? S : never;

export const exportRunLifecycle = defineLifecycle('export run', {
  CREATED: { initial: true, to: ['RUNNING', 'CANCELLED', 'TIMEDOUT'] },
  /** Picked up; a retry or a takeover after its worker died moves it into RUNNING again. */
  RUNNING: { to: ['RUNNING', 'COMPLETED', 'FAILED', 'CANCELLED', 'TIMEDOUT'] },
  COMPLETED: {},
  FAILED: { failed: true },
  /** Its export was cancelled, or failed because another run did. */
  CANCELLED: {},
  TIMEDOUT: { failed: true },
});

export type ExportRunStatus = typeof exportRunLifecycle extends Lifecycle<infer S> ? S : never;

export const exportStatusWire = wireEnum(WireExportStatus, exportLifecycle);
export const exportRunStatusWire = wireEnum(WireExportRunStatus, exportRunLifecycle);
