/**
 * Recording how a run ended, so that no run is left `running` by a write that cannot succeed: the
 * write is retried through an outage of the database for as long as the attempt holds the run,
 * and one that Postgres refuses for good (a value too large, or one that does not serialize) is
 * replaced by an `error` ending that says which part could not be stored and why.
 */
import type { Logger } from '@berth/log';
import type { RunEnding, RunStore } from '../storage/runs.js';
import { backoffMs, isTransientDbError, sleep } from '../storage/retry.js';

/** Why a run ended `error` though its graph finished: part of its result could not be stored. */
export const UNSTORABLE = 'UnstorableResultError';

/**
 * Records `ending` (RunStore.complete). Returns `finished: false` when another attempt holds the
 * run, or when `stopped()` (this attempt lost its lease while the database was away). Throws only
 * when even an `error` ending without values cannot be written for good.
 */
export async function recordEnd(
  runs: Pick<RunStore, 'complete' | 'endedBy' | 'unstorable'>,
  log: Logger,
  ending: RunEnding,
  stopped: () => boolean,
): Promise<{ finished: boolean; nextRunId?: string; ending: RunEnding }> {
  let retried = false;
  for (let attempt = 0; ; attempt++) {
    if (stopped()) return { finished: false, ending };
    try {
      const done = await runs.complete(ending);
      if (done.finished || !retried) return { ...done, ending };
      // An earlier try may have been recorded, its answer lost with the connection.
      const { ended, nextRunId } = await runs.endedBy(ending.runId, ending.attempt);
      return { finished: ended, ...(nextRunId ? { nextRunId } : {}), ending };
    } catch (error) {
      if (isTransientDbError(error)) {
        if (!retried) log.warn({ err: error, runId: ending.runId }, 'could not record the end of the run: retrying while the database is unreachable');
        retried = true;
        await sleep(backoffMs(attempt));
        continue;
      }
      if (ending.error !== null && (ending.error as { error?: string }).error === UNSTORABLE) throw error;
      const problem = await runs.unstorable(ending).catch(() => undefined);
      const message = `the run's ${problem?.field ?? 'result'} could not be stored: ${problem?.reason ?? (error as Error).message}`;
      log.error({ err: error, runId: ending.runId, field: problem?.field }, 'the end of the run could not be stored as it is: it ends `error`');
      // The thread keeps its last stored values, as after a crash.
      const { values: _values, interrupts: _interrupts, ...rest } = ending;
      ending = { ...rest, status: 'error', failed: true, interrupted: false, output: null, error: { error: UNSTORABLE, message } };
    }
  }
}
