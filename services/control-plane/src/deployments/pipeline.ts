/**
 * The revision pipeline: BullMQ jobs move a revision QUEUED → AWAITING_BUILD → BUILDING →
 * AWAITING_DEPLOY → DEPLOYING → DEPLOYED (or BUILD_FAILED / DEPLOY_FAILED, the reason in its
 * logs), each move checked against the revision lifecycle (revision-lifecycle.ts) by the store.
 * Each step is a job, and each job starts from the status the revision is in, so a job re-run
 * after a control-plane restart (a stalled job) resumes the revision. A revision that a newer one
 * replaced is INTERRUPTED: its job notices (the lifecycle refuses its next move) and stops.
 * A running step stops at once: in this process directly, in others through the NOTIFY the store
 * sends on the move (a slow safety poll covers notifications lost while LISTEN reconnects).
 */
import { randomBytes } from 'node:crypto';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { PgListener } from '@berth/broker';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import { NotFoundError } from '@berth/errors';
import { IllegalTransitionError } from '@berth/lifecycle';
import { JobQueue, JobWorker, defineJobCatalog, type QueueBackendConfig } from '@berth/queue';
import type { Logger } from '@berth/log';
import { secondsSince } from '@berth/metrics';
import { z } from 'zod';
import { BuildCancelledError, BuildFailedError, type ProjectBuilder } from '../build/index.js';
import { DeployFailedError, type Deployer, type RevisionHealthEvent } from '../deployers/deployer.js';
import type { AgentDatabases } from './agent-databases.js';
import type { AgentRedis } from './agent-redis.js';
import { RevisionInterruptedError, watchInterrupts, type InterruptWatch } from './interrupt-watch.js';
import { RevisionLogWriter } from './log-writer.js';
import type { SecretBox } from '@berth/secret-box';
import { langGraphConfigPath, revisionUpload } from './revision-config.js';
import type { RevisionStatus } from './revision-lifecycle.js';
import { REVISION_INTERRUPTS_CHANNEL } from './notifications.js';
import { revisionStepDuration, watchRevisions } from './metrics.js';
import type { DeploymentRow, DeploymentStore, MoveChange, RevisionRow } from './store.js';
import { revisionSpec } from './revision-spec.js';
import type { TracingEndpoint } from '../config.js';
import type { ArtifactStore } from '../artifacts/artifact-store.js';

export const REVISION_QUEUE = 'control-plane-revisions';

/** Backoff of a local revision that does not come back after a restart: 1 s, doubling, at most 30 s. */
const RESTORE_FIRST_DELAY_MS = 1000;
const RESTORE_MAX_DELAY_MS = 30_000;

export const revisionJobs = defineJobCatalog({
  'revision.build': {
    // reuse_build_of: an earlier revision of the same source whose build this one takes if it is still there (a redeploy).
    schema: z.object({ revision_id: z.uuid(), reuse_build_of: z.uuid().optional() }),
    timeoutMs: 30 * 60_000,
    removeOnComplete: true,
    removeOnFail: true,
  },
  'revision.deploy': { schema: z.object({ revision_id: z.uuid() }), timeoutMs: 30 * 60_000, removeOnComplete: true, removeOnFail: true },
  'deployment.remove': {
    schema: z.object({ deployment_id: z.uuid() }),
    attempts: 5,
    backoff: { type: 'exponential', delayMs: 1000 },
    removeOnComplete: true,
    removeOnFail: true,
  },
});

export interface PipelineDeps {
  store: DeploymentStore;
  /** The platform database, whose notifications of interrupted revisions stop their steps here. */
  databaseUrl: string;
  secretBox: SecretBox;
  builder: ProjectBuilder;
  deployer: Deployer;
  queue: QueueBackendConfig;
  log: Logger;
  /** Each deployment's own database and roles (its agent servers never get the platform's). */
  databases: AgentDatabases;
  /** Each deployment's own Redis user (none: agent servers keep queues and run events in Postgres). */
  redis?: AgentRedis;
  /** Platform settings every agent server gets (LOG_LEVEL, HOST, ...); never a platform credential. */
  agentEnv: Record<string, string>;
  /** Where agent servers send their traces (DeploymentsConfig.tracingEndpoint); none: they do not trace. */
  tracingEndpoint?: TracingEndpoint;
  /** Where built revisions are kept for agent servers that run elsewhere, and the endpoint they fetch them from. */
  archives?: { store: ArtifactStore; url: string };
}

export interface RevisionPipelineOptions {
  /**
   * Revision steps run at the same time by this control plane.
   * @default 4
   */
  concurrency?: number;
  /**
   * How long a replaced revision keeps serving after the switch, so that requests routed with a
   * slightly old view (the gateway caches routes for about a second) still reach it.
   * @default 3000
   */
  retireDelayMs?: number;
  /**
   * How often a running step checks, unprompted, whether its revision was interrupted: the safety
   * net under the notification that stops it at once (one sent while this control plane's LISTEN
   * connection was down is lost). A step whose checks fail for `lockDurationMs` stops.
   * @default 10000
   */
  interruptPollMs?: number;
  /** The clock of the retire delay, the restore backoff, the upload sweeps and the interrupt checks. @default systemClock */
  clock?: Clock;
  /**
   * How long a step's job stays locked to this control plane without a renewal; after a crash
   * another control plane resumes the step once this has passed (see `stalledIntervalMs`).
   * @default 30000
   */
  lockDurationMs?: number;
  /**
   * How often this control plane looks for steps whose control plane died.
   * @default 30000
   */
  stalledIntervalMs?: number;
  /**
   * Seconds a finished upload no revision uses is kept (DeploymentsConfig.unusedUploadTtlSeconds).
   * @default 3600
   */
  unusedUploadTtlSeconds?: number;
}

export class RevisionPipeline {
  private readonly queue: JobQueue<typeof revisionJobs>;
  private worker?: JobWorker<typeof revisionJobs>;
  private readonly logs: RevisionLogWriter;
  /** Steps running in this process, to stop at once when their revision is interrupted. */
  private readonly running = new Map<string, { controller: AbortController; watch: InterruptWatch }>();
  private readonly timers = new Set<Timer>();
  private sweeper?: Timer;
  /** Stops reporting the revisions by status to the metrics. */
  private unwatch?: () => void;
  private readonly clock: Clock;
  /** Notifications of interrupted revisions, from whichever control plane interrupted them. */
  private readonly listener: PgListener;
  /** Health records, written one after the other so that a recovery never lands before its crash. */
  private healthWrites: Promise<void> = Promise.resolve();
  private readonly stopHealth: () => void;

  constructor(
    private readonly deps: PipelineDeps,
    private readonly options: RevisionPipelineOptions = {},
  ) {
    this.queue = new JobQueue(revisionJobs, REVISION_QUEUE, deps.queue, { log: deps.log });
    this.logs = new RevisionLogWriter(deps.store.logs, deps.log);
    this.stopHealth = deps.deployer.onHealth?.((event) => this.recordHealth(event)) ?? (() => undefined);
    this.clock = options.clock ?? systemClock;
    this.listener = new PgListener({
      connectionString: deps.databaseUrl,
      channels: [REVISION_INTERRUPTS_CHANNEL],
      onNotification: (_channel, revisionId) => this.running.get(revisionId)?.watch.checkNow(),
      // Notifications sent while the connection was down are lost: every running step checks.
      onReconnect: () => {
        for (const { watch } of this.running.values()) watch.checkNow();
      },
      log: deps.log,
      applicationName: 'berth-control-plane-revisions',
    });
  }

  /** Starts working on jobs and brings the serving revisions back (a restart). */
  async start(): Promise<void> {
    await this.listener
      .ensure()
      .catch((error: unknown) =>
        this.deps.log.warn({ err: error }, 'cannot listen for interrupted revisions: steps interrupted by another control plane stop at their safety poll'),
      );
    await this.queue.ready();
    this.worker = new JobWorker(
      revisionJobs,
      REVISION_QUEUE,
      this.deps.queue,
      {
        'revision.build': ({ revision_id, reuse_build_of }, ctx) => this.runBuild(revision_id, ctx.signal, reuse_build_of),
        'revision.deploy': ({ revision_id }, ctx) => this.runDeploy(revision_id, ctx.signal),
        'deployment.remove': ({ deployment_id }) => this.runRemove(deployment_id),
      },
      {
        concurrency: this.options.concurrency ?? 4,
        log: this.deps.log,
        ...(this.options.lockDurationMs ? { lockDurationMs: this.options.lockDurationMs } : {}),
        ...(this.options.stalledIntervalMs ? { stalledIntervalMs: this.options.stalledIntervalMs } : {}),
      },
    );
    await this.worker.ready();
    // Uploads nobody finished within an hour, and finished ones nobody used in time, are dropped;
    // sweeping at least once per TTL keeps one from outliving it by more than that.
    const unusedSeconds = this.options.unusedUploadTtlSeconds ?? 3600;
    this.sweeper = this.clock.setInterval(
      () => {
        this.deps.store
          .sweepUploads({ unfinishedSeconds: 3600, unusedSeconds })
          .catch((error: unknown) => this.deps.log.warn({ err: error }, 'sweeping uploads failed'));
      },
      Math.min(10 * 60_000, unusedSeconds * 1000),
    );
    const serving = await this.deps.store.activeRevisions();
    // Agent servers that went down with the control plane: until one is back its deployment is
    // UNHEALTHY and answers 503 (retry) rather than pointing at a dead port.
    if (!this.deps.deployer.revisionsSurviveClose) {
      for (const revision of serving) await this.deps.store.setHealth(revision.id, 'the control plane restarted: the agent server is starting again', null);
    }
    this.unwatch = watchRevisions(this.deps.store, this.deps.log);
    void this.restore(serving);
  }

  async close(): Promise<void> {
    this.unwatch?.();
    this.sweeper?.cancel();
    for (const timer of this.timers) timer.cancel();
    for (const { controller } of this.running.values()) controller.abort(new Error('the control plane is stopping'));
    await this.listener.close();
    await this.worker?.close();
    await this.queue.close();
    await this.logs.close();
    await this.deps.deployer.close();
    this.stopHealth();
    await this.healthWrites;
  }

  /**
   * Queues the build of a QUEUED revision (none when it was interrupted meanwhile).
   * @param reuseBuildOf an earlier revision of the same source (a redeploy): its build is taken as
   *   this one's while it is still there, instead of building again
   */
  async build(revisionId: string, reuseBuildOf?: string): Promise<void> {
    if (await this.advance(revisionId, 'AWAITING_BUILD')) {
      await this.queue.enqueue('revision.build', { revision_id: revisionId, ...(reuseBuildOf ? { reuse_build_of: reuseBuildOf } : {}) });
    }
  }

  /** Stops a revision's step if it runs in this process (others are notified by the store's move). */
  interrupt(revisionId: string): void {
    this.running.get(revisionId)?.controller.abort(new RevisionInterruptedError(revisionId));
  }

  /** The deploy log of a revision, where a running agent server's output goes. */
  runtimeLog(revisionId: string): (line: string) => void {
    return this.logs.for(revisionId, 'deploy');
  }

  async remove(deploymentId: string): Promise<void> {
    await this.queue.enqueue('deployment.remove', { deployment_id: deploymentId });
  }

  private async runBuild(revisionId: string, jobSignal: AbortSignal, reuseBuildOf?: string): Promise<void> {
    const { store, builder } = this.deps;
    const revision = await store.revisionById(revisionId);
    if (!revision || !(await this.advance(revisionId, 'BUILDING'))) return;
    const log = this.logs.for(revisionId, 'build');
    const started = performance.now();
    await this.step(revisionId, jobSignal, async (signal) => {
      const config = revision.source_revision_config;
      try {
        let built: MoveChange = {};
        const reused = reuseBuildOf && revision.source !== 'external_docker' ? await this.reusableBuild(revision, reuseBuildOf, log) : undefined;
        if (revision.source === 'external_docker') {
          log(`image ${config.image_uri}: nothing to build`);
        } else if (reused) {
          built = reused;
        } else {
          log(`building ${config.source_tarball_path}`);
          const artifact = await builder.build(
            {
              tarball: chunksStream(store.uploadChunks(revisionUpload(revision))),
              configPath: langGraphConfigPath(config),
              deploymentId: revision.deployment_id,
              // A fresh folder per attempt: an installer orphaned by a crashed control plane may
              // still be writing into the folder of the attempt before.
              revisionId: `${revisionId}-${randomBytes(4).toString('hex')}`,
            },
            log,
            signal,
          );
          log(`built: graphs ${artifact.graphs.join(', ')}`);
          built = { artifact_path: builder.storedPath(artifact.path), custom_auth: await hasCustomAuth(join(artifact.path, artifact.configPath)) };
          if (this.deps.archives) {
            const stored = await this.deps.archives.store.put(revision.deployment_id, revisionId, artifact.path);
            log(`stored the build in object storage (${stored.size} bytes, sha256 ${stored.sha256})`);
            built = { ...built, archive_key: stored.key, archive_sha256: stored.sha256 };
          }
        }
        if (await this.advance(revisionId, 'AWAITING_DEPLOY', built)) await this.queue.enqueue('revision.deploy', { revision_id: revisionId });
      } catch (error) {
        // First: a cancellation is a BuildFailedError too, but the step says why it stopped.
        if (error instanceof BuildCancelledError && signal.aborted) throw signal.reason;
        if (error instanceof BuildFailedError) {
          log(error.message, 'error');
          await this.advance(revisionId, 'BUILD_FAILED', { status_message: error.message });
          this.logs.end(revisionId);
          return;
        }
        throw error;
      }
    })
      .catch(async (error: unknown) => this.failed(revisionId, 'BUILD_FAILED', error, log))
      .finally(() => revisionStepDuration.observe({ step: 'build' }, secondsSince(started)));
  }

  /**
   * The build of an earlier revision of the same source, for `revision` to deploy as its own (a
   * redeploy, a rollback: nothing to unpack, install or load again), when its artifact folder (and,
   * with object storage, its archive) is still there; undefined when it is not, and it builds again.
   * The folder is read-only to agent servers, so two revisions may serve from it at once.
   */
  private async reusableBuild(revision: RevisionRow, earlierId: string, log: (line: string) => void): Promise<MoveChange | undefined> {
    const earlier = await this.deps.store.revisionById(earlierId);
    const configPath = langGraphConfigPath(revision.source_revision_config);
    const archives = this.deps.archives;
    const there =
      earlier?.artifact_path &&
      earlier.deployment_id === revision.deployment_id &&
      earlier.source_upload_id === revision.source_upload_id &&
      langGraphConfigPath(earlier.source_revision_config) === configPath &&
      (await exists(join(this.deps.builder.folderOf(earlier.artifact_path), configPath))) &&
      (!archives || (earlier.archive_key && earlier.archive_sha256 && (await archives.store.has(earlier.archive_key))));
    if (!there) {
      log(`the build of revision ${earlierId} is gone: building again`);
      return undefined;
    }
    log(`reusing the build of revision ${earlierId}: nothing to install or load again`);
    return {
      artifact_path: earlier.artifact_path!,
      custom_auth: earlier.custom_auth,
      ...(archives ? { archive_key: earlier.archive_key!, archive_sha256: earlier.archive_sha256! } : {}),
    };
  }

  private async runDeploy(revisionId: string, jobSignal: AbortSignal): Promise<void> {
    const { store, deployer } = this.deps;
    const revision = await store.revisionById(revisionId);
    if (!revision || !(await this.advance(revisionId, 'DEPLOYING'))) return;
    const deployment = await store.byId(revision.deployment_id);
    if (!deployment) return;
    const log = this.logs.for(revisionId, 'deploy');
    const started = performance.now();
    await this.step(revisionId, jobSignal, async (signal) => {
      try {
        const spec = await revisionSpec(this.deps, deployment, revision);
        log(`deploying on ${deployer.name}`);
        const deployed = await deployer.deploy(spec, log, signal);
        const activation = await store.activate(revisionId, deployed.url).catch((error: unknown) => {
          if (error instanceof IllegalTransitionError) return undefined; // interrupted while it came up
          throw error;
        });
        if (!activation) {
          log('interrupted while it came up (a newer revision replaced it, or the deployment was deleted): stopping it', 'warn');
          await deployer.retire(deployment.id, revisionId, log);
          this.logs.end(revisionId);
          return;
        }
        const { active, previous } = activation;
        if (!active) {
          log('a newer revision serves already: stopping this one', 'warn');
          await deployer.retire(deployment.id, revisionId, log);
          this.logs.end(revisionId);
          return;
        }
        log(`deployed: serving traffic`);
        if (previous) this.retireLater(deployment.id, previous);
      } catch (error) {
        if (error instanceof DeployFailedError) {
          log(error.message, 'error');
          await this.advance(revisionId, 'DEPLOY_FAILED', { status_message: error.message });
          this.logs.end(revisionId);
          return;
        }
        throw error;
      }
    })
      .catch(async (error: unknown) => this.failed(revisionId, 'DEPLOY_FAILED', error, log))
      .finally(() => revisionStepDuration.observe({ step: 'deploy' }, secondsSince(started)));
  }

  private async runRemove(deploymentId: string): Promise<void> {
    await this.deps.deployer.remove(deploymentId, (line) => this.deps.log.info({ deploymentId }, line));
    await this.deps.archives?.store.removeDeployment(deploymentId);
    await this.deps.databases.drop(deploymentId);
    await this.deps.redis?.remove(deploymentId);
    await this.deps.store.remove(deploymentId);
  }

  /**
   * Runs a step under a signal that aborts when the job's does, when the revision is interrupted
   * (here or by another process), or when the control plane stops.
   */
  private async step(revisionId: string, jobSignal: AbortSignal, work: (signal: AbortSignal) => Promise<void>): Promise<void> {
    // A LISTEN connection that could not be made at start is tried again with each step.
    this.listener.ensure().catch(() => undefined);
    const controller = new AbortController();
    const onJobAbort = () => controller.abort(jobSignal.reason);
    jobSignal.addEventListener('abort', onJobAbort, { once: true });
    const watch = watchInterrupts({
      revisionId,
      stands: async () => {
        const revision = await this.deps.store.revisionById(revisionId);
        return revision !== undefined && revision.status !== 'INTERRUPTED';
      },
      controller,
      log: this.deps.log,
      clock: this.clock,
      everyMs: this.options.interruptPollMs ?? 10_000,
      // As long as this control plane's hold on the step's job: after it, another may resume the step.
      failForMs: this.options.lockDurationMs ?? 30_000,
    });
    this.running.set(revisionId, { controller, watch });
    try {
      await work(controller.signal);
    } finally {
      watch.cancel();
      jobSignal.removeEventListener('abort', onJobAbort);
      this.running.delete(revisionId);
      await this.logs.flush();
    }
  }

  /**
   * Moves a revision on (the store checks the move against the lifecycle). False when the
   * lifecycle refused it because the revision moved on meanwhile — a newer revision interrupted
   * it, its deployment was deleted, or another control plane ran this step — and the caller stops.
   */
  private async advance(revisionId: string, to: RevisionStatus, change?: MoveChange): Promise<boolean> {
    try {
      await this.deps.store.move({ revisionId }, to, change);
      return true;
    } catch (error) {
      if (!(error instanceof IllegalTransitionError || error instanceof NotFoundError)) throw error;
      this.deps.log.info({ revisionId, to, reason: error.message }, 'the revision moved on meanwhile: this step stops');
      return false;
    }
  }

  /** A step that ended with an unexpected error or an interruption. */
  private async failed(
    revisionId: string,
    failedStatus: 'BUILD_FAILED' | 'DEPLOY_FAILED',
    error: unknown,
    log: (line: string, level?: 'info' | 'warn' | 'error') => void,
  ): Promise<void> {
    if (error instanceof RevisionInterruptedError || (error as Error)?.name === 'RevisionInterruptedError') {
      log('interrupted: a newer revision replaced this one', 'warn');
      this.logs.end(revisionId);
      await this.logs.flush();
      return;
    }
    const message = error instanceof Error ? error.message : String(error);
    this.deps.log.error({ err: error, revisionId, status: failedStatus }, 'a revision step failed');
    log(`failed: ${message}`, 'error');
    await this.advance(revisionId, failedStatus, { status_message: message });
    this.logs.end(revisionId);
    await this.logs.flush();
  }

  private retireLater(deploymentId: string, revisionId: string): void {
    this.later(this.options.retireDelayMs ?? 3000, async () => {
      const log = this.logs.for(revisionId, 'deploy');
      try {
        await this.deps.deployer.retire(deploymentId, revisionId, log);
        log('retired: it no longer serves');
      } catch (error) {
        this.deps.log.warn({ err: error, revisionId }, 'retiring a replaced revision failed');
      } finally {
        // Replaced either way: whatever it still prints is not followed any more.
        this.logs.end(revisionId);
      }
    });
  }

  /** Runs `work` after `ms` on the pipeline's clock, unless the pipeline closes first. */
  private later(ms: number, work: () => Promise<void>): void {
    const timer = this.clock.setTimeout(() => {
      this.timers.delete(timer);
      void work();
    }, ms);
    this.timers.add(timer);
  }

  /** Records a serving revision going down (its deployment is UNHEALTHY, its traffic refused with the reason) or up again. */
  private recordHealth(event: RevisionHealthEvent): void {
    void (event.healthy ? this.writeHealth(event.revisionId, null, event.url) : this.writeHealth(event.revisionId, event.reason));
  }

  /** Queues a health record behind the ones before (see `healthWrites`); a failure is logged. */
  private writeHealth(revisionId: string, message: string | null, upstreamUrl?: string | null): Promise<void> {
    this.healthWrites = this.healthWrites
      .then(() => this.deps.store.setHealth(revisionId, message, upstreamUrl))
      .catch((error: unknown) => this.deps.log.error({ err: error, revisionId, message }, 'recording the health of a revision failed'));
    return this.healthWrites;
  }

  /** Brings the serving revision of every deployment back up (after a restart of the control plane). */
  private async restore(revisions: RevisionRow[]): Promise<void> {
    for (const revision of revisions) await this.restoreOne(revision, 0);
  }

  /**
   * Brings one serving revision back; it is supervised from then on, as after its first deploy.
   * A local one that does not come up is tried again, with backoff, for as long as it serves its
   * deployment (which stays UNHEALTHY meanwhile, saying why).
   */
  private async restoreOne(revision: RevisionRow, failures: number): Promise<void> {
    const { store, deployer } = this.deps;
    const log = this.logs.for(revision.id, 'deploy');
    try {
      const serves = async () => {
        const deployment = await store.byId(revision.deployment_id);
        return deployment && !deployment.deleting && deployment.active_revision_id === revision.id ? deployment : undefined;
      };
      const deployment = await serves();
      if (!deployment) return; // replaced or deleted meanwhile
      log(failures ? 'trying again to bring this revision back' : 'the control plane restarted: bringing this revision back');
      const deployed = await deployer.deploy(await revisionSpec(this.deps, deployment, revision, true), log);
      if (!(await serves())) {
        await deployer.retire(revision.deployment_id, revision.id, log);
        this.logs.end(revision.id);
        return;
      }
      await this.writeHealth(revision.id, null, deployed.url);
    } catch (error) {
      this.deps.log.error({ err: error, revisionId: revision.id }, 'bringing a deployed revision back failed');
      // Revisions that outlive the control plane may well still serve: only others are known to be down.
      if (deployer.revisionsSurviveClose) {
        log(`could not bring it back: ${(error as Error).message}`, 'error');
        return;
      }
      const delayMs = Math.min(RESTORE_MAX_DELAY_MS, RESTORE_FIRST_DELAY_MS * 2 ** failures);
      const reason = `could not bring the agent server back: ${(error as Error).message}; retrying in ${delayMs / 1000} s`;
      log(reason, 'error');
      await this.writeHealth(revision.id, reason);
      this.later(delayMs, () => this.restoreOne(revision, failures + 1));
    }
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function hasCustomAuth(configFile: string): Promise<boolean> {
  const config = JSON.parse(await readFile(configFile, 'utf8')) as { auth?: { path?: unknown } };
  return typeof config.auth?.path === 'string';
}

/** An upload's chunks as a Node stream for the builder (one chunk in memory at a time). */
function chunksStream(chunks: AsyncGenerator<Buffer>): NodeJS.ReadableStream {
  return Readable.from(chunks);
}
