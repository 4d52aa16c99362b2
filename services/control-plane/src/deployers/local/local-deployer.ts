/**
 * The `local` deployer: every revision's agent server (API + run workers) runs on this machine, on
 * its own loopback port: in a container of its own where the platform has a container engine
 * (agent-containers.ts), else as a child process of the control plane (as an OS user of the
 * deployment's own when the control plane is root, os-users.ts). A new revision starts beside the
 * old one and counts as deployed once it answers `GET /ok`; the old one is retired afterwards
 * (SIGTERM: the server finishes requests in flight, then exits). Deployed agent servers are
 * supervised (supervised-server.ts): one that exits unasked is restarted, with backoff, on its port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import type { Clock } from '@berth/clock';
import type { Logger } from '@berth/log';
import {
  DeployFailedError,
  type DeployLog,
  type DeployedRevision,
  type Deployer,
  type RevisionHealthEvent,
  type RevisionHealthListener,
  type RevisionSpec,
} from '../deployer.js';
import type { AgentContainer, AgentContainers } from './agent-containers.js';
import type { DeploymentUser, OsUsers } from './os-users.js';
import { SupervisedServer, freePort, type RestartPolicy } from './supervised-server.js';

export type { RestartPolicy } from './supervised-server.js';

export interface LocalDeployerOptions {
  /** The agent server script (`AGENT_SERVE_SCRIPT` of `@berth/agent-runtime`). */
  serveScript: string;
  /** The control plane's log: crashes and restarts of agent servers go there too. */
  logger: Logger;
  /**
   * Base environment of every agent server (PATH, HOME, ...; the control plane's `processEnv` setting);
   * nothing else is inherited.
   */
  baseEnv: Record<string, string>;
  /**
   * Longest a revision may take to answer `/ok` (at its first start and after a restart).
   * @default 60000
   */
  healthTimeoutMs?: number;
  /**
   * How long a retired revision may take to finish its requests before it is killed.
   * @default 15000
   */
  drainMs?: number;
  /** How crashed agent servers are restarted (see {@link RestartPolicy} for the defaults). */
  restart?: RestartPolicy;
  /** The time restarts wait by (tests move it by hand). @default systemClock */
  clock?: Clock;
  /**
   * Runs each deployment's agent servers as an OS user of its own, with a private home and
   * read-only access to its builds (needs root; see os-users.ts).
   * @default none: agent servers run as this process's user
   */
  users?: OsUsers;
  /**
   * Runs each revision's agent server in a container of its own, as the deployment's user (so it
   * needs `users` too).
   * @default none: child processes
   */
  containers?: AgentContainers;
  /**
   * How often containers that no running revision owns are removed (see {@link LocalDeployer.start}).
   * @default 60000
   */
  reconcileIntervalMs?: number;
  /** Receives what agent servers print once they run (their runtime log). */
  onOutput?: (spec: { deploymentId: string; revisionId: string }, line: string, stream: 'stdout' | 'stderr') => void;
}

interface Entry {
  deploymentId: string;
  server: SupervisedServer;
  container?: AgentContainer;
}

export class LocalDeployer implements Deployer {
  readonly name = 'local';
  /** Agent servers are child processes: they stop with the control plane. */
  readonly revisionsSurviveClose = false;
  private readonly servers = new Map<string, Entry>();
  private readonly listeners = new Set<RevisionHealthListener>();
  /** Revisions whose container is being set up (not in `servers` yet): the reconciler keeps them. */
  private readonly opening = new Set<string>();
  private reconciler: NodeJS.Timeout | undefined;

  constructor(private readonly options: LocalDeployerOptions) {
    if (options.containers && !options.users) throw new TypeError("containers need users: they run as the deployment's uid");
  }

  /**
   * With containers: removes the containers of this installation that no revision of this
   * deployer runs — all of them now (what a control plane killed with SIGKILL left; its revisions
   * are deployed again, new), and then every `reconcileIntervalMs`.
   */
  async start(): Promise<void> {
    if (!this.options.containers) return;
    await this.reconcile();
    this.reconciler = setInterval(() => {
      this.reconcile().catch((error: unknown) => this.options.logger.error({ err: error }, 'removing agent-server containers that no revision runs failed'));
    }, this.options.reconcileIntervalMs ?? 60_000);
    this.reconciler.unref();
  }

  /** Removes containers (and socket folders) that no revision runs; returns their names. */
  async reconcile(): Promise<string[]> {
    const containers = this.options.containers;
    if (!containers) return [];
    const removed = await containers.reconcile(new Set([...this.servers.keys(), ...this.opening]));
    if (removed.length) this.options.logger.warn({ containers: removed }, 'removed agent-server containers that no running revision owns');
    return removed;
  }

  async deploy(spec: RevisionSpec, log: DeployLog, signal?: AbortSignal): Promise<DeployedRevision> {
    if (spec.artifact.kind !== 'directory') {
      throw new DeployFailedError('the local deployer runs built projects: use source internal_source (an image needs the kubernetes deployer)');
    }
    signal?.throwIfAborted();
    await this.stop(spec.revisionId, log); // a re-run of the same step starts clean
    const ids = { deploymentId: spec.deploymentId, revisionId: spec.revisionId };
    const built = { ...spec, artifact: spec.artifact };
    const user = await this.userFor(spec.deploymentId);
    const env = this.agentEnv(built, user);
    let container: AgentContainer | undefined;
    if (this.options.containers && user) {
      this.opening.add(spec.revisionId);
      try {
        container = await this.options.containers.open(built, user, env, log);
      } finally {
        this.opening.delete(spec.revisionId);
      }
    } else if (user) {
      log(`running as OS user ${user.uid} (home ${user.home})`);
    }
    const server = new SupervisedServer(await freePort(), {
      ...ids,
      spawn: (port) => container?.spawn(port) ?? this.spawnAgentServer(built, port, user, env),
      log,
      logger: this.options.logger,
      onOutput: (line, stream) => this.options.onOutput?.(ids, line, stream),
      onHealth: (event) => this.report({ ...ids, ...event }),
      restart: this.options.restart ?? {},
      ...(this.options.clock ? { clock: this.options.clock } : {}),
      healthTimeoutMs: this.options.healthTimeoutMs ?? 60_000,
      drainMs: this.options.drainMs ?? 15_000,
    });
    const entry: Entry = { deploymentId: spec.deploymentId, server, ...(container ? { container } : {}) };
    this.servers.set(spec.revisionId, entry);
    try {
      await server.start(signal);
    } catch (error) {
      if (this.servers.get(spec.revisionId) === entry) this.servers.delete(spec.revisionId);
      await container
        ?.close()
        .catch((cleanup: unknown) => this.options.logger.error({ err: cleanup, revisionId: spec.revisionId }, "removing a failed revision's container failed"));
      throw error;
    }
    log('the agent server answers /ok');
    return { revisionId: spec.revisionId, url: server.url };
  }

  async retire(deploymentId: string, revisionId: string, log: DeployLog): Promise<void> {
    const entry = this.servers.get(revisionId);
    if (!entry || entry.deploymentId !== deploymentId) return;
    log('retiring: letting requests in flight finish');
    await this.stop(revisionId, log);
  }

  async remove(deploymentId: string, log: DeployLog): Promise<void> {
    const revisions = [...this.servers].filter(([, entry]) => entry.deploymentId === deploymentId);
    await Promise.all(revisions.map(([revisionId]) => this.stop(revisionId, log)));
    await this.options.users?.remove(deploymentId);
  }

  onHealth(listener: RevisionHealthListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    clearInterval(this.reconciler);
    await Promise.all([...this.servers.keys()].map((revisionId) => this.stop(revisionId, () => undefined)));
    await this.options.containers?.close();
  }

  /** Revisions of the deployment whose agent server runs now (for tests and status). */
  running(deploymentId: string): string[] {
    return [...this.servers].filter(([, entry]) => entry.deploymentId === deploymentId && entry.server.running).map(([revisionId]) => revisionId);
  }

  /** The agent server's environment but its PORT (a container's moves the addresses in it). */
  private agentEnv(spec: RevisionSpec & { artifact: { kind: 'directory' } }, user: DeploymentUser | undefined): Record<string, string> {
    return {
      ...this.options.baseEnv,
      ...(user ? { HOME: user.home, TMPDIR: user.home } : {}),
      ...spec.secrets,
      ...spec.env,
      BERTH_AGENT_CONFIG: join(spec.artifact.path, spec.artifact.configPath),
      HOST: '127.0.0.1',
      ...(spec.resources.workers !== undefined ? { N_JOBS_PER_WORKER: String(spec.resources.workers) } : {}),
      // The server exits when this process goes away (its stdin closes), even on a crash.
      BERTH_EXIT_WITH_PARENT: '1',
    };
  }

  /**
   * Starts one agent server process for a revision: the only place that spawns one on the host
   * (first start and restarts alike; containers start in agent-containers.ts).
   */
  private spawnAgentServer(
    spec: RevisionSpec & { artifact: { kind: 'directory' } },
    port: number,
    user: DeploymentUser | undefined,
    env: Record<string, string>,
  ): ChildProcess {
    return spawn(process.execPath, [this.options.serveScript], {
      cwd: spec.artifact.path,
      // Node drops supplementary groups when it changes the user.
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
      env: { ...env, PORT: String(port) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
  }

  /** The deployment's OS user, with access to its builds, when agent servers are isolated. */
  private async userFor(deploymentId: string): Promise<DeploymentUser | undefined> {
    const users = this.options.users;
    if (!users) return undefined;
    const user = await users.userFor(deploymentId);
    await users.grantArtifacts(deploymentId, user);
    return user;
  }

  private report(event: RevisionHealthEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        this.options.logger.error({ err: error, revisionId: event.revisionId }, 'a health listener failed');
      }
    }
  }

  private async stop(revisionId: string, log: DeployLog): Promise<void> {
    const entry = this.servers.get(revisionId);
    if (!entry) return;
    this.servers.delete(revisionId);
    try {
      await entry.server.stop(log);
    } finally {
      await entry.container?.close();
    }
  }
}
