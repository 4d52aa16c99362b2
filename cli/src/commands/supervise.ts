/**
 * `berth supervise` (hidden): the supervisor `berth up` starts in a session of its own and leaves
 * running (see supervisor/supervisor.ts). It reports to `berth up` over IPC, logs to its stdout
 * (`berth up` points it at .berth/logs/supervisor.log), and stops everything on SIGTERM, SIGINT or
 * SIGHUP — during its start too: what it started is stopped then.
 */
import { createLogger } from '@berth/log';
import type { CliEnv } from '../env.js';
import { STOP_SIGNALS } from '../signals.js';
import { BerthSupervisor, type SupervisorReport } from '../supervisor/supervisor.js';

export async function supervise(env: CliEnv): Promise<void> {
  const logger = createLogger({ name: 'supervisor', level: env.LOG_LEVEL });
  const stop = new AbortController();
  for (const signal of STOP_SIGNALS) {
    process.on(signal, () => {
      if (stop.signal.aborted) return;
      logger.info({ signal }, 'stopping');
      stop.abort(new Error(`stopped by ${signal}`));
    });
  }
  // Signal handlers and the units' watches keep no process alive: this does, until stopped.
  const alive = setInterval(() => undefined, 2 ** 30);
  try {
    const supervisor = new BerthSupervisor(env, logger);
    try {
      await supervisor.start(stop.signal, (message) => void report(message));
    } catch (error) {
      logger.error({ err: error }, 'the start failed: stopped what had started');
      await report({ failed: (error as Error).message });
      process.exitCode = 1;
      return;
    }
    logger.info({ pid: process.pid }, 'supervising');
    // `berth up` is done with it: nothing ties the two any more.
    if (process.connected) process.disconnect();
    await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
    if (!(await supervisor.stop())) process.exitCode = 1;
  } finally {
    clearInterval(alive);
  }
}

/** To the `berth up` that started this process, while it listens. */
function report(message: SupervisorReport): Promise<void> {
  const send = process.send?.bind(process);
  if (!send || !process.connected) return Promise.resolve();
  // A `berth up` that went away meanwhile is no reason to fail: it only stops listening.
  return new Promise((resolve) => send(message, undefined, {}, () => resolve()));
}
