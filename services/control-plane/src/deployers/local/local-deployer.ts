/**
 * The `local` deployer: every revision's agent server (API + run workers) is a child process of
 * the control plane on this machine, on its own loopback port. A new revision starts beside the
 * old one and counts as deployed once it answers `GET /ok`; the old one is retired afterwards
 * (SIGTERM: the server finishes requests in flight, then exits).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { DeployFailedError, type DeployLog, type DeployedRevision, type Deployer, type RevisionSpec } from '../deployer.js';

export interface LocalDeployerOptions {
  /** The agent server script (`AGENT_SERVE_SCRIPT` of `@berth/agent-runtime`). */
  serveScript: string;
  /**
   * Base environment of every agent server (PATH, HOME, ...); nothing else is inherited.
   * @default { PATH, HOME } of this process
   */
  baseEnv?: Record<string, string>;
  /**
   * Longest a revision may take to answer `/ok`.
   * @default 60000
   */
  healthTimeoutMs?: number;
  /**
   * How long a retired revision may take to finish its requests before it is killed.
   * @default 15000
   */
  drainMs?: number;
  /** Receives what agent servers print once they run (their runtime log). */
  onOutput?: (spec: { deploymentId: string; revisionId: string }, line: string, stream: 'stdout' | 'stderr') => void;
}

interface Process {
  deploymentId: string;
  revisionId: string;
  child: ChildProcess;
  url: string;
  exited: Promise<void>;
}

/** Lines of a revision's output kept to explain a failed start. */
const TAIL_LINES = 30;

export class LocalDeployer implements Deployer {
  readonly kind = 'local' as const;
  private readonly processes = new Map<string, Process>();

  constructor(private readonly options: LocalDeployerOptions) {}

  async deploy(spec: RevisionSpec, log: DeployLog, signal?: AbortSignal): Promise<DeployedRevision> {
    if (spec.artifact.kind !== 'directory') {
      throw new DeployFailedError('the local deployer runs built projects: use source internal_source (an image needs the kubernetes deployer)');
    }
    signal?.throwIfAborted();
    await this.stop(spec.revisionId, log); // a re-run of the same step starts clean
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const tail: string[] = [];
    const child = spawn(process.execPath, [this.options.serveScript], {
      cwd: spec.artifact.path,
      env: {
        ...(this.options.baseEnv ?? { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/' }),
        ...spec.secrets,
        ...spec.env,
        BERTH_AGENT_CONFIG: join(spec.artifact.path, spec.artifact.configPath),
        HOST: '127.0.0.1',
        PORT: String(port),
        ...(spec.resources.workers !== undefined ? { N_JOBS_PER_WORKER: String(spec.resources.workers) } : {}),
        // The server exits when this process goes away (its stdin closes), even on a crash.
        BERTH_EXIT_WITH_PARENT: '1',
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const entry: Process = { deploymentId: spec.deploymentId, revisionId: spec.revisionId, child, url, exited };
    this.processes.set(spec.revisionId, entry);
    for (const stream of ['stdout', 'stderr'] as const) {
      let rest = '';
      child[stream]!.setEncoding('utf8').on('data', (text: string) => {
        const lines = (rest + text).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) {
          tail.push(line);
          if (tail.length > TAIL_LINES) tail.shift();
          this.options.onOutput?.(spec, line, stream);
        }
      });
    }
    log(`starting the agent server (pid ${child.pid}) on ${url}`);
    try {
      await this.waitHealthy(entry, signal);
    } catch (error) {
      await this.stop(spec.revisionId, log);
      if (error instanceof DeployFailedError) {
        for (const line of tail) log(line, 'error');
        throw error;
      }
      throw error;
    }
    log('the agent server answers /ok');
    return { revisionId: spec.revisionId, url };
  }

  async retire(deploymentId: string, revisionId: string, log: DeployLog): Promise<void> {
    const entry = this.processes.get(revisionId);
    if (!entry || entry.deploymentId !== deploymentId) return;
    log('retiring: letting requests in flight finish');
    await this.stop(revisionId, log);
  }

  async remove(deploymentId: string, log: DeployLog): Promise<void> {
    const revisions = [...this.processes.values()].filter((p) => p.deploymentId === deploymentId);
    await Promise.all(revisions.map((p) => this.stop(p.revisionId, log)));
  }

  async close(): Promise<void> {
    await Promise.all([...this.processes.keys()].map((revisionId) => this.stop(revisionId, () => undefined)));
  }

  /** Revisions this deployer runs now, by deployment (for tests and status). */
  running(deploymentId: string): string[] {
    return [...this.processes.values()].filter((p) => p.deploymentId === deploymentId && p.child.exitCode === null).map((p) => p.revisionId);
  }

  private async waitHealthy(entry: Process, signal?: AbortSignal): Promise<void> {
    const deadline = Date.now() + (this.options.healthTimeoutMs ?? 60_000);
    let exitCode: number | null = null;
    void entry.exited.then(() => (exitCode = entry.child.exitCode ?? -1));
    for (;;) {
      signal?.throwIfAborted();
      if (exitCode !== null) throw new DeployFailedError(`the agent server exited with code ${exitCode} before it answered`);
      if (await answers(`${entry.url}/ok`)) return;
      if (Date.now() > deadline) throw new DeployFailedError(`the agent server did not answer /ok within ${Math.round((this.options.healthTimeoutMs ?? 60_000) / 1000)} s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  private async stop(revisionId: string, log: DeployLog): Promise<void> {
    const entry = this.processes.get(revisionId);
    if (!entry) return;
    this.processes.delete(revisionId);
    if (entry.child.exitCode !== null || entry.child.signalCode !== null) return;
    entry.child.kill('SIGTERM');
    const drained = await Promise.race([entry.exited.then(() => true), sleep(this.options.drainMs ?? 15_000).then(() => false)]);
    if (!drained) {
      log(`the agent server did not stop within ${this.options.drainMs ?? 15_000} ms: killing it`, 'warn');
      entry.child.kill('SIGKILL');
      await entry.exited;
    }
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await response.body?.cancel();
    return response.ok;
  } catch {
    return false;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** A free loopback port (the OS picks one). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
