/**
 * Control plane: deployments, revisions and auth-wait. `start(config)` applies the migrations of
 * the `control_plane` schema and serves, over gRPC, the standard health service (which the
 * gateway's /readyz checks) and `berth.controlplane.v1.AuthFlowService` (login flows).
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadKubeConfig } from '@berth/kube';
import { createDatabase, migrate } from '@berth/db';
import { createLogger, type Logger } from '@berth/log';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { AuthFlowService, DeploymentService } from '@berth/proto';
import { selectQueueBackend } from '@berth/queue';
import { startGrpcService, type RunningGrpcService } from '@berth/rpc';
import { FlowNotifier } from './auth-flows/notifier.js';
import { authFlowHandlers } from './auth-flows/rpc.js';
import { AuthFlows } from './auth-flows/service.js';
import { AuthFlowStore } from './auth-flows/store.js';
import { ProjectBuilder } from './build/index.js';
import type { ControlPlaneConfig, DeploymentsConfig } from './config.js';
import type { Deployer } from './deployers/deployer.js';
import { KubernetesDeployer } from './deployers/kubernetes/kubernetes-deployer.js';
import { LocalDeployer } from './deployers/local/local-deployer.js';
import { OsUsers, detectIsolation, type IsolationMode } from './deployers/local/os-users.js';
import { AgentDatabases } from './deployments/agent-databases.js';
import { AgentRedis } from './deployments/agent-redis.js';
import { RevisionPipeline } from './deployments/pipeline.js';
import { deploymentHandlers } from './deployments/rpc.js';
import { SecretBox } from '@berth/secret-box';
import { Deployments } from './deployments/service.js';
import { DeploymentStore } from './deployments/store.js';
import { ArtifactStore } from './artifacts/artifact-store.js';
import { startArtifactServer, type RunningArtifactServer } from './artifacts/artifact-server.js';
import type { ControlPlaneTables } from './tables.js';

export type { ControlPlaneConfig, DeploymentsConfig, TracingEndpoint } from './config.js';
export { SecretBox } from '@berth/secret-box';
export { loadControlPlaneConfig } from './env.js';
export { AuthFlows } from './auth-flows/service.js';
export { deploymentTracingCredential } from './deployments/service.js';
export type { AuthFlowsOptions, WaitOutcome } from './auth-flows/service.js';
export { AuthFlowStore } from './auth-flows/store.js';
export type { ClaimResult, FlowRecord, FlowStatus } from './auth-flows/store.js';
export { FlowNotifier } from './auth-flows/notifier.js';
export type { IsolationMode } from './deployers/local/os-users.js';
// A Kubernetes source deploy's parts, which images/tests runs under Podman against the real images.
export { ProjectBuilder } from './build/index.js';
export { ArtifactStore } from './artifacts/artifact-store.js';
export { artifactCredential, artifactPath, startArtifactServer } from './artifacts/artifact-server.js';
export { buildManifests, type SourceRevisionSpec } from './deployers/kubernetes/manifests.js';
export { AgentDatabases } from './deployments/agent-databases.js';
export { agentSchema } from './deployments/pipeline.js';

/**
 * Whether local agent servers run as OS users of their own on this machine, and if not, why.
 * @param stateDir the folder holding builds (`artifacts/`) and agent homes (`agents/`)
 */
export function detectLocalIsolation(stateDir: string): Promise<IsolationMode> {
  return detectIsolation([process.execPath, AGENT_SERVE_SCRIPT], stateDir);
}

/** gRPC package whose health status this service reports. */
export const SERVICE_NAME = 'berth.controlplane.v1';

/** The Postgres schema of the control plane. */
export const CONTROL_PLANE_SCHEMA = 'control_plane';

/** Numbered SQL migrations of the control plane (`NNNN_description.sql`). */
export const controlPlaneMigrationsDir = fileURLToPath(new URL('../migrations', import.meta.url));

/** NOTIFY channel on which completed login flows are announced (payload: digest of the auth_id). */
export const AUTH_FLOW_CHANNEL = 'berth_control_plane_auth_flows';

/** Applies the control plane's migrations (safe to call from many processes at once). */
export async function migrateControlPlane(databaseUrl: string): Promise<void> {
  await migrate({ connectionString: databaseUrl, schema: CONTROL_PLANE_SCHEMA, directory: controlPlaneMigrationsDir });
}

export interface RunningControlPlane extends RunningGrpcService {
  /** The login flows this process serves (for in-process callers and tests). */
  authFlows: AuthFlows;
  /** The deployments this process serves, when configured. */
  deployments?: Deployments;
}

/** The deployments part of the control plane: store, revision pipeline and deployer. */
async function startDeployments(config: ControlPlaneConfig & { deployments: DeploymentsConfig }, db: ConstructorParameters<typeof DeploymentStore>[0], logger: Logger) {
  const settings = config.deployments;
  const store = new DeploymentStore(db);
  const processEnv = settings.processEnv ?? {};
  let pipeline: RevisionPipeline | undefined;
  // Agent servers (and builds) run as OS users of their own where this machine allows it.
  const isolation = await detectLocalIsolation(dirname(settings.artifactsDir));
  const users = isolation.kind === 'os-user' ? new OsUsers({ homesDir: join(dirname(settings.artifactsDir), 'agents'), artifactsDir: settings.artifactsDir }) : undefined;
  // Wiring picks the adapter; how adapters differ is the deployer port's business, not the pipeline's.
  let deployer: Deployer | undefined;
  let archives: { store: ArtifactStore; server: RunningArtifactServer; url: string } | undefined;
  if (settings.archives) {
    const artifactStore = new ArtifactStore(settings.archives.storage);
    const server = await startArtifactServer({
      artifacts: artifactStore,
      secretBox: new SecretBox(settings.secretKey),
      host: settings.archives.host,
      port: settings.archives.port,
      log: logger,
      lookup: async (revisionId) => {
        const revision = await store.revisionById(revisionId);
        return revision?.archive_key && revision.archive_sha256 ? { key: revision.archive_key, sha256: revision.archive_sha256 } : undefined;
      },
    });
    archives = { store: artifactStore, server, url: settings.archives.url ?? server.url };
  }
  let agentRedis: AgentRedis | undefined;
  const close = async () => {
    // The pipeline closes its deployer; one made before a failed start is closed here.
    await (pipeline ?? deployer)?.close();
    await agentRedis?.close();
    await archives?.server.close();
    archives?.store.close();
  };
  try {
    if (settings.deployer?.kind === 'kubernetes') {
      const { kind: _kind, server, token, kubeconfig, ...options } = settings.deployer;
      deployer = new KubernetesDeployer({ ...options, cluster: server ? { server, ...(token ? { token } : {}) } : loadKubeConfig(kubeconfig) });
    } else {
      if (isolation.kind === 'none') logger.warn({ reason: isolation.reason }, 'local agent servers are not isolated from the platform');
      deployer = new LocalDeployer({
        serveScript: AGENT_SERVE_SCRIPT,
        ...(users ? { users } : {}),
        logger,
        baseEnv: processEnv,
        // What a running agent server prints is its revision's runtime (deploy) log.
        onOutput: (spec, line) => pipeline?.runtimeLog(spec.revisionId)(line),
      });
    }
    const queue = selectQueueBackend({ databaseUrl: config.databaseUrl, ...(settings.redisUrl ? { redisUrl: settings.redisUrl } : {}) });
    const databases = new AgentDatabases({
      adminUrl: config.databaseUrl,
      ...(settings.agentDatabaseUrl ? { agentUrl: settings.agentDatabaseUrl } : {}),
      ...(settings.agentConnectionLimit ? { connectionLimit: settings.agentConnectionLimit } : {}),
    });
    try {
      await databases.lockPlatformDatabase();
    } catch (error) {
      throw new Error('the control plane could not close the platform database to agent roles (REVOKE CONNECT … FROM PUBLIC): it needs to own that database', { cause: error });
    }
    // Agent servers reach Redis as users of their own (BERTH_AGENT_REDIS=acl), or not at all (off:
    // their queues and run events stay in their own database).
    agentRedis = settings.redisUrl && settings.agentRedis !== 'off'
      ? new AgentRedis({ url: settings.redisUrl, secretBox: new SecretBox(settings.secretKey), log: logger, ...(settings.agentRedisResyncMs ? { resyncIntervalMs: settings.agentRedisResyncMs } : {}) })
      : undefined;
    await agentRedis?.start(async () => (await store.activeRevisions()).map((r) => r.deployment_id));
    pipeline = new RevisionPipeline({
      store,
      secretBox: new SecretBox(settings.secretKey),
      builder: new ProjectBuilder({ artifactsDir: settings.artifactsDir, env: processEnv, ...(users ? { users } : {}) }),
      deployer,
      queue: queue.kind === 'postgres' ? { ...queue, schema: `${CONTROL_PLANE_SCHEMA}_queue` } : { ...queue, prefix: 'berth:control-plane' },
      log: logger,
      databases,
      ...(agentRedis ? { redis: agentRedis } : {}),
      // Where agent servers listen (HOST, PORT) is the deployer's.
      agentEnv: {
        LOG_LEVEL: settings.agentLogLevel ?? 'info',
        ...(settings.webhookPrivateEgress?.length ? { BERTH_WEBHOOK_PRIVATE_EGRESS: settings.webhookPrivateEgress.join(',') } : {}),
      },
      ...(settings.tracingEndpoint ? { tracingEndpoint: settings.tracingEndpoint } : {}),
      ...(archives ? { archives: { store: archives.store, url: archives.url.replace(/\/+$/, '') } } : {}),
    }, { ...settings.pipeline, ...(settings.unusedUploadTtlSeconds ? { unusedUploadTtlSeconds: settings.unusedUploadTtlSeconds } : {}) });
    await pipeline.start();
  } catch (error) {
    // What did start (the artifact endpoint's listener, the queue) must not outlive a failed start.
    await close();
    throw error;
  }
  return { pipeline, close, deployments: new Deployments(store, new SecretBox(settings.secretKey), pipeline, {
    ...(settings.maxDeploymentsPerTenant ? { maxDeploymentsPerTenant: settings.maxDeploymentsPerTenant } : {}),
  }) };
}

export async function start(
  config: ControlPlaneConfig,
  logger: Logger = createLogger({ name: 'control-plane', level: config.logLevel }),
): Promise<RunningControlPlane> {
  if (config.migrate !== false) await migrateControlPlane(config.databaseUrl);
  const database = createDatabase<ControlPlaneTables>({
    connectionString: config.databaseUrl,
    schema: CONTROL_PLANE_SCHEMA,
    applicationName: 'berth-control-plane',
  });
  const notifier = new FlowNotifier({ connectionString: config.databaseUrl, channel: AUTH_FLOW_CHANNEL, log: logger });
  const store = new AuthFlowStore(database.db, { channel: AUTH_FLOW_CHANNEL });
  const authFlows = new AuthFlows(store, notifier, logger, {
    ...(config.authFlowTtlSeconds ? { defaultTtlSeconds: config.authFlowTtlSeconds } : {}),
  });
  let service: RunningGrpcService | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  let deploymentsPart: Awaited<ReturnType<typeof startDeployments>> | undefined;
  try {
    // Listening before serving: the first Wait must not miss a completion.
    await notifier.ready();
    const settings = config.deployments;
    if (settings) deploymentsPart = await startDeployments({ ...config, deployments: settings }, database.db, logger);
    const part = deploymentsPart;
    service = await startGrpcService({
      name: SERVICE_NAME,
      host: config.grpcHost,
      port: config.grpcPort,
      logger,
      internalToken: config.internalToken,
      setup: (server) => {
        server.add(AuthFlowService, authFlowHandlers(authFlows));
        if (part) server.add(DeploymentService, deploymentHandlers(part.deployments));
      },
    });
    sweeper = setInterval(() => {
      store.sweep().catch((error: unknown) => logger.warn({ err: error }, 'sweeping login flows failed'));
    }, config.sweepIntervalMs ?? 60_000);
    sweeper.unref();
  } catch (error) {
    await deploymentsPart?.close();
    await notifier.close();
    await database.close();
    throw error;
  }
  const grpc = service;
  return {
    address: grpc.address,
    port: grpc.port,
    health: grpc.health,
    authFlows,
    ...(deploymentsPart ? { deployments: deploymentsPart.deployments } : {}),
    close: async () => {
      clearInterval(sweeper);
      await deploymentsPart?.close();
      // Waiters answer `pending` at once, so the server does not have to cancel their calls.
      await notifier.close();
      await grpc.close();
      await database.close();
    },
  };
}
