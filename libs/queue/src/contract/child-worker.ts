/**
 * A contract worker in a child process, so a test can `kill -9` it mid-job or watch whether the
 * process exits after `close()`. Run with `node --conditions=berth-source --import tsx`.
 *
 * Every handler announces the job and then hangs. Protocol — stdout lines: `ready` once it takes
 * jobs, `taken <jobId>` per job, `closed` after a close; stdin lines: `close` or `close-force`.
 * After a close nothing keeps the process alive but what the worker itself left behind.
 */
import { createInterface } from 'node:readline';
import { JobWorker } from '../worker.js';
import { CHILD_SPEC_ENV, contractJobs, type ChildWorkerSpec } from './jobs.js';

const raw = process.env[CHILD_SPEC_ENV];
if (!raw) throw new Error(`${CHILD_SPEC_ENV} is not set`);
const spec = JSON.parse(raw) as ChildWorkerSpec;

const hang = async (_payload: unknown, ctx: { jobId: string }): Promise<void> => {
  process.stdout.write(`taken ${ctx.jobId}\n`);
  await new Promise<never>(() => undefined);
};

const worker = new JobWorker(
  contractJobs,
  spec.queue,
  spec.backend,
  { echo: hang, 'flaky-fixed': hang, 'flaky-exponential': hang, slow: hang, work: hang, ephemeral: hang },
  { lockDurationMs: spec.lockDurationMs, stalledIntervalMs: spec.stalledIntervalMs },
);
const keepAlive = setInterval(() => undefined, 60_000);
const commands = createInterface({ input: process.stdin });
commands.on('line', (line) => {
  if (line !== 'close' && line !== 'close-force') return;
  commands.close();
  process.stdin.destroy();
  clearInterval(keepAlive);
  void worker.close({ force: line === 'close-force' }).then(() => process.stdout.write('closed\n'));
});
await worker.ready();
process.stdout.write('ready\n');
