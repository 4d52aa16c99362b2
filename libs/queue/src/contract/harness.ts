/**
 * Plumbing for the queue contract suite: creates queues and workers on one backend with unique
 * queue names and closes them after each test, records handler calls, and runs a worker in a
 * child process. Test support only: excluded from the package build.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type { QueueBackendConfig } from '../backend.js';
import type { AnyJobCatalog } from '../catalog.js';
import { JobQueue } from '../queue.js';
import { JobWorker, type JobCompletedEvent, type JobFailedEvent, type JobHandlers, type JobWorkerOptions } from '../worker.js';
import { until } from '@berth/testing';
import { CHILD_SPEC_ENV, contractJobs, type ChildWorkerSpec } from './jobs.js';

type ContractJobs = typeof contractJobs;

/** One handler call, as seen by a test. */
export interface Call {
  jobId: string;
  name: string;
  attempt: number;
  payload: unknown;
  at: number;
  worker: string;
}

/** Everything workers of one test did: handler calls and worker events. */
export class Recorder {
  readonly calls: Call[] = [];
  readonly completed: (JobCompletedEvent & { worker: string })[] = [];
  readonly failed: (JobFailedEvent & { worker: string })[] = [];
  readonly stalled: string[] = [];

  callsOf(jobId: string): Call[] {
    return this.calls.filter((c) => c.jobId === jobId);
  }

  completedOf(jobId: string): (JobCompletedEvent & { worker: string }) | undefined {
    return this.completed.find((e) => e.jobId === jobId);
  }

  failedOf(jobId: string): (JobFailedEvent & { worker: string })[] {
    return this.failed.filter((e) => e.jobId === jobId);
  }
}

/** Handlers of the contract catalog; a job a test does not expect throws. */
export type ContractHandlers = Partial<JobHandlers<ContractJobs>>;

export class Harness {
  readonly recorder = new Recorder();
  readonly #closers: (() => Promise<void>)[] = [];
  readonly #backend: QueueBackendConfig;
  readonly queueName: string;

  constructor(backend: QueueBackendConfig) {
    this.#backend = backend;
    this.queueName = `contract-${randomBytes(5).toString('hex')}`;
  }

  get backend(): QueueBackendConfig {
    return this.#backend;
  }

  queue<C extends AnyJobCatalog = ContractJobs>(catalog?: C): JobQueue<C> {
    const queue = new JobQueue((catalog ?? contractJobs) as C, this.queueName, this.#backend);
    this.#closers.push(() => queue.close());
    return queue;
  }

  /** Starts a worker whose calls and events go to the recorder; resolves once it takes jobs. */
  async worker(handlers: ContractHandlers, options: JobWorkerOptions = {}, label = 'local'): Promise<JobWorker<ContractJobs>> {
    const wrap = (name: keyof JobHandlers<ContractJobs>) =>
      (async (payload: unknown, ctx: { jobId: string; attempt: number; name: string }) => {
        this.recorder.calls.push({ jobId: ctx.jobId, name: ctx.name, attempt: ctx.attempt, payload, at: Date.now(), worker: label });
        const handler = handlers[name] as ((p: unknown, c: unknown) => Promise<unknown>) | undefined;
        if (!handler) throw new Error(`unexpected job '${name}'`);
        return handler(payload, ctx);
      }) as never;
    const all = Object.fromEntries(contractJobs.names.map((n) => [n, wrap(n)])) as unknown as JobHandlers<ContractJobs>;
    const worker = new JobWorker(contractJobs, this.queueName, this.#backend, all, options);
    worker.on('completed', (e) => this.recorder.completed.push({ ...e, worker: label }));
    worker.on('failed', (e) => this.recorder.failed.push({ ...e, worker: label }));
    worker.on('stalled', (e) => this.recorder.stalled.push(e.jobId));
    this.#closers.push(() => worker.close({ force: true }));
    await worker.ready();
    return worker;
  }

  /** Starts `child-worker.ts` in a child process; resolves once it is taking jobs. */
  async childWorker(options: { lockDurationMs: number; stalledIntervalMs: number }): Promise<ChildWorker> {
    const spec: ChildWorkerSpec = { backend: this.#backend, queue: this.queueName, ...options };
    const script = fileURLToPath(new URL('./child-worker.ts', import.meta.url));
    const child = spawn(process.execPath, ['--conditions=berth-source', '--import', 'tsx', script], {
      env: { ...process.env, [CHILD_SPEC_ENV]: JSON.stringify(spec) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const worker = new ChildWorker(child);
    this.#closers.push(async () => worker.kill());
    await until('the child worker to be ready', () => worker.lines.includes('ready') || worker.failure(), 20_000);
    return worker;
  }

  /** Closes everything this harness created, most recent first. */
  async close(): Promise<void> {
    const closers = this.#closers.splice(0).reverse();
    // Best effort after a test: one closer failing must not leave the others open.
    for (const close of closers) await close().catch(() => undefined);
  }
}

export class ChildWorker {
  readonly lines: string[] = [];
  #stderr = '';
  #exit: Promise<void>;

  constructor(readonly process: ChildProcess) {
    let buffered = '';
    process.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      buffered += chunk;
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      this.lines.push(...parts);
    });
    process.stderr?.setEncoding('utf8').on('data', (chunk: string) => (this.#stderr += chunk));
    this.#exit = new Promise((resolve) => process.once('exit', () => resolve()));
  }

  /** Throws when the child died before being killed (with its stderr); false otherwise. */
  failure(): false {
    if (this.process.exitCode !== null) throw new Error(`child worker exited with ${this.process.exitCode}: ${this.#stderr}`);
    return false;
  }

  /** Sends a command line (`close`, `close-force`). */
  send(command: string): void {
    this.process.stdin?.write(`${command}\n`);
  }

  /** True once the process has exited. */
  exited(): boolean {
    return this.process.exitCode !== null || this.process.signalCode !== null;
  }

  /** The id of the job it took, once it took one. */
  taken(): string | undefined {
    return this.lines.find((l) => l.startsWith('taken '))?.slice('taken '.length);
  }

  /** SIGKILL: the worker gets no chance to release its jobs. */
  async kill(): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) this.process.kill('SIGKILL');
    await this.#exit;
  }
}
