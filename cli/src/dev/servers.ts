/**
 * The agent server processes of `berth dev`, forked with node:cluster: this (primary) process
 * holds the listening socket and hands connections to them, so `--processes N` serves one port
 * from N processes, and a reload starts a new generation on the same port while the old one still
 * serves — then the old one stops taking work, finishes its runs and exits. ESM modules cannot be
 * unloaded: new code needs new processes.
 *
 * Not the control plane's SupervisedServer: that one restarts a crashed server on a port of its
 * own and polls it; here processes share the primary's port and are replaced on request.
 */
import cluster, { type Worker } from 'node:cluster';
import { CliError } from '../client.js';

/** A forked process tells the primary it serves, at this URL, and the project's files it loaded. */
export interface ServerReady {
  ready: string;
  sources: string[];
}

/** A forked process loaded more of the project's files (a graph imports a module when it runs). */
export interface SourcesLoaded {
  sources: string[];
}

/** The primary asks a forked process to stop, letting its runs finish for at most `drain` ms. */
export interface DrainRequest {
  drain: number;
}

export interface DevServersOptions {
  processes: number;
  /** Environment of the forked processes, on top of this one's. */
  env: Record<string, string>;
  /** How long a replaced generation may take to finish its runs. */
  drainMs: number;
  /** A serving process exited unasked: how, and how many still serve. */
  onExit(how: string, remaining: number): void;
}

/** A process that does not exit this long after it was asked to (beyond its drain) is killed. */
const STOP_GRACE_MS = 10_000;

export class DevServers {
  private serving: Worker[] = [];
  private readonly live = new Set<Worker>();
  /** The project's files each process loaded (absolute paths). */
  private readonly sources = new Map<Worker, Set<string>>();
  private stopped = false;

  constructor(private readonly options: DevServersOptions) {}

  /** Starts the processes; resolves with their URL once all serve. */
  async start(): Promise<string> {
    const { workers, url } = await this.generation();
    this.serving = workers;
    return url;
  }

  /**
   * Starts a new generation with the project as it is now and, once all of it serves, lets the
   * previous one drain (in the background). Rejects when the new one does not start; the
   * previous one serves on then.
   */
  async reload(): Promise<void> {
    const { workers } = await this.generation();
    const previous = this.serving;
    this.serving = workers;
    for (const worker of previous) void this.retire(worker, this.options.drainMs);
  }

  /** The project's files the serving processes loaded: what the project runs now. */
  servingSources(): Set<string> {
    return new Set(this.serving.flatMap((worker) => [...(this.sources.get(worker) ?? [])]));
  }

  /** Stops every process at once (no drain). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.live].map((worker) => this.retire(worker)));
  }

  private async generation(): Promise<{ workers: Worker[]; url: string }> {
    if (this.stopped) throw new CliError('berth dev is stopping');
    const workers = Array.from({ length: this.options.processes }, () => this.fork());
    try {
      const urls = await Promise.all(
        workers.map(
          (worker) =>
            new Promise<string>((resolve, reject) => {
              worker.on('message', (message: Partial<ServerReady>) => typeof message?.ready === 'string' && resolve(message.ready));
              worker.once('exit', (code, signal) => reject(new CliError(`an agent server process exited (${how(code, signal)}) before it was ready`)));
            }),
        ),
      );
      return { workers, url: urls[0]! };
    } catch (error) {
      await Promise.all(workers.map((worker) => this.retire(worker)));
      throw error;
    }
  }

  private fork(): Worker {
    const worker = cluster.fork(this.options.env);
    this.live.add(worker);
    const sources = new Set<string>();
    this.sources.set(worker, sources);
    worker.on('message', (message: Partial<SourcesLoaded>) => {
      if (Array.isArray(message?.sources)) for (const path of message.sources) sources.add(String(path));
    });
    worker.once('exit', (code, signal) => {
      this.live.delete(worker);
      this.sources.delete(worker);
      const index = this.serving.indexOf(worker);
      if (index < 0 || this.stopped) return;
      this.serving.splice(index, 1);
      this.options.onExit(how(code, signal), this.serving.length);
    });
    return worker;
  }

  /** Asks a process to stop — draining for `drainMs` when given — and kills it if it does not. */
  private retire(worker: Worker, drainMs?: number): Promise<void> {
    if (worker.isDead()) return Promise.resolve();
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const terminate = () => worker.process.kill('SIGTERM');
    // A process whose channel closed meanwhile is ending anyway: make sure it does.
    if (drainMs !== undefined && worker.isConnected()) worker.send({ drain: drainMs } satisfies DrainRequest, undefined, (error) => error && terminate());
    else terminate();
    const timer = setTimeout(() => worker.process.kill('SIGKILL'), (drainMs ?? 0) + STOP_GRACE_MS);
    return exited.finally(() => clearTimeout(timer));
  }
}

function how(code: number | null, signal: string | null): string {
  return signal ? `signal ${signal}` : `code ${code}`;
}
