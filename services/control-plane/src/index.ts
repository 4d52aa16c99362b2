/**
 * Control plane: deployments, revisions and auth-wait. `start(config)` applies the migrations of
 * the `control_plane` schema and serves, over gRPC, the standard health service (which the
 * gateway's /readyz checks) and `berth.controlplane.v1.AuthFlowService` (login flows).
 */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError } from '@berth/config';
import { loadKubeConfig } from '@berth/kube';
import { createDatabase, migrate } from '@berth/db';
import { systemClock, type Timer } from '@berth/clock';
import { createLogger, type Logger } from '@berth/log';
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
import { AgentContainers, DEFAULT_CONTAINER_LIMITS, agentSocketsDir, installationId } from './deployers/local/agent-containers.js';
import { LocalDeployer } from './deployers/local/local-deployer.js';
import { OsUsers, detectIsolation, type IsolationMode } from './deployers/local/os-users.js';
import { AgentDatabases } from './deployments/agent-databases.js';
import { AgentRedis } from './deployments/agent-redis.js';
import { RevisionPipeline } from './deployments/pipeline.js';
import { deploymentHandlers } from './deployments/rpc.js';
import { SecretBox } from '@berth/secret-box';
import { Deployments } from './deployments/service.js';
import { DeploymentWatch } from './deployments/deployment-watch.js';
import { NotificationHub } from './deployments/notification-hub.js';
import { RevisionLogs } from './deployments/revision-logs.js';
import { DEPLOYMENT_CHANGES_CHANNEL, REVISION_LOGS_CHANNEL } from './deployments/notifications.js';
import { DeploymentStore } from './deployments/store.js';
import { ArtifactStore } from './artifacts/artifact-store.js';
import { startArtifactServer, type RunningArtifactServer } from './artifacts/artifact-server.js';
import type { ControlPlaneTables } from './tables.js';

export type { ContainerLimits, ControlPlaneConfig, DeploymentsConfig, PodmanCommand, TracingEndpoint } from './config.js';
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
export { buildNetworkPolicy } from './deployers/kubernetes/network-policy.js';
export { AgentDatabases, agentDatabaseName, agentDatabaseRoles, agentSchema } from './deployments/agent-databases.js';

/**
 * Whether local agent servers can run as OS users of their own on this machine (in containers or
 * not), and if not, why.
 * @param serveScript the agent server program (none with the kubernetes deployer: only builds run here)
 * @param stateDir the folder holding builds (`artifacts/`) and agent homes (`agents/`)
 */
function detectLocalIsolation(serveScript: string | undefined, stateDir: string): Promise<IsolationMode> {
  return detectIsolation([process.execPath, ...(serveScript ? [serveScript] : [])], stateDir);
}

/**
 * The agent server program of the local deployer (none with the kubernetes deployer).
 * @throws ConfigError when the local deployer is not given one
 */
function localServeScript(settings: DeploymentsConfig): string | undefined {
  if (settings.deployer?.kind === 'kubernetes') return undefined;
  if (!settings.agentServeScript) {
    throw new ConfigError(['deployments.agentServeScript: the local deployer needs the agent server program (AGENT_SERVE_SCRIPT of @berth/agent-runtime)']);
  }
  return settings.agentServeScript;
}

/** One line for people on how local agent servers are contained. */
export function describeIsolation(isolation: IsolationMode): string {
  switch (isolation.kind) {
    case 'container':
      return "each deployment runs in a container of its own, on the platform's Podman engine";
    case 'os-user':
      return `each deployment runs as an OS user of its own, NOT in a container${isolation.reason ? `: ${isolation.reason}` : ''}`;
    case 'none':
      return `NONE: ${isolation.reason}`;
  }
}

/**
 * The private ranges agent servers may reach: the operator's, and the webhook receivers' (a range
 * the operator allowed for webhooks is one the agent server's egress must reach).
 */
function agentPrivateEgress(settings: DeploymentsConfig): string[] {
  return [...(settings.deploymentPrivateEgress ?? []), ...(settings.webhookPrivateEgress ?? [])];
}

/**
 * Containers of agent servers when an engine is given and they can run here (root, the runtime
 * readable by their users); else why not, and agent servers run as OS users.
 */
async function agentContainers(
  settings: DeploymentsConfig,
  serveScript: string,
  stateDir: string,
  logger: Logger,
): Promise<{ containers?: AgentContainers; reason?: string }> {
  if (!settings.agentEngine) return { reason: 'the platform has no container engine (it starts one as root unless BERTH_SANDBOXES=off)' };
  const installation = installationId(stateDir);
  const containers = new AgentContainers({
    podman: settings.agentEngine,
    installation,
    socketsDir: agentSocketsDir(installation),
    serveScript,
    hidden: [resolve(stateDir)],
    ...(settings.agentLimits ? { limits: settings.agentLimits } : {}),
    privateEgress: agentPrivateEgress(settings),
    logger,
  });
  try {
    await containers.prepare();
    return { containers };
  } catch (error) {
    logger.error({ err: error }, 'agent servers cannot run in containers here: they run as OS users of their own');
    return { reason: `containers cannot run here (${(error as Error).message})` };
  }
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
  /** Their revisions' logs, when deployments are configured. */
  revisionLogs?: RevisionLogs;
  /** How its local agent servers are contained (with the local deployer). */
  isolation?: IsolationMode;
}

/** The deployments part of the control plane: store, revision pipeline and deployer. */
async function startDeployments(
  config: ControlPlaneConfig & { deployments: DeploymentsConfig },
  db: ConstructorParameters<typeof DeploymentStore>[0],
  logger: Logger,
) {
  const settings = config.deployments;
  const store = new DeploymentStore(db);
  const processEnv = settings.processEnv ?? {};
  let pipeline: RevisionPipeline | undefined;
  // Agent servers (and builds) run as OS users of their own where this machine allows it; agent
  // servers in containers where it has an engine too.
  const stateDir = dirname(settings.artifactsDir);
  const serveScript = localServeScript(settings);
  let isolation = await detectLocalIsolation(serveScript, stateDir);
  const users =
    isolation.kind === 'os-user'
      ? new OsUsers({
          homesDir: join(stateDir, 'agents'),
          artifactsDir: settings.artifactsDir,
          ...(settings.uidRegistryDir ? { registryDir: settings.uidRegistryDir } : {}),
        })
      : undefined;
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
  const hub = new NotificationHub({
    databaseUrl: config.databaseUrl,
    channels: [REVISION_LOGS_CHANNEL, DEPLOYMENT_CHANGES_CHANNEL],
    log: logger,
    ...(settings.maxStreamsPerTenant ? { maxStreamsPerTenant: settings.maxStreamsPerTenant } : {}),
  });
  const streams = { logs: new RevisionLogs(store, hub), watch: new DeploymentWatch(store, hub) };
  const close = async () => {
    await hub.close();
    // The pipeline closes its deployer; one made before a failed start is closed here.
    await (pipeline ?? deployer)?.close();
    await agentRedis?.close();
    await archives?.server.close();
    archives?.store.close();
  };
  try {
    if (settings.deployer?.kind === 'kubernetes') {
      const { kind: _kind, server, token, kubeconfig, networkPolicy, ...options } = settings.deployer;
      deployer = new KubernetesDeployer({
        ...options,
        cluster: server ? { server, ...(token ? { token } : {}) } : loadKubeConfig(kubeconfig),
        ...(networkPolicy ? { networkPolicy: { ...networkPolicy, privateEgress: agentPrivateEgress(settings) } } : {}),
      });
    } else {
      const { containers, reason } = users ? await agentContainers(settings, serveScript!, stateDir, logger) : {};
      if (containers) isolation = { kind: 'container' };
      else if (isolation.kind === 'os-user') isolation = { kind: 'os-user', ...(reason ? { reason } : {}) };
      if (isolation.kind === 'none') logger.warn({ reason: isolation.reason }, 'local agent servers are not isolated from the platform');
      if (isolation.kind === 'os-user')
        logger.warn({ reason: isolation.reason }, "local agent servers are not in containers: they see the host's processes and network");
      const local = new LocalDeployer({
        serveScript: serveScript!,
        ...(users ? { users } : {}),
        ...(containers ? { containers } : {}),
        ...(settings.agentReconcileIntervalMs ? { reconcileIntervalMs: settings.agentReconcileIntervalMs } : {}),
        logger,
        baseEnv: processEnv,
        // What a running agent server prints is its revision's runtime (deploy) log.
        onOutput: (spec, line) => pipeline?.runtimeLog(spec.revisionId)(line),
      });
      deployer = local;
      // Containers a killed predecessor left go before any revision is deployed again.
      await local.start();
    }
    const queue = selectQueueBackend({ databaseUrl: config.databaseUrl, ...(settings.redisUrl ? { redisUrl: settings.redisUrl } : {}) });
    const databases = new AgentDatabases({
      adminUrl: config.databaseUrl,
      ...(settings.agentDatabaseUrl ? { agentUrl: settings.agentDatabaseUrl } : {}),
      ...(settings.agentConnectionLimit ? { connectionLimit: settings.agentConnectionLimit } : {}),
    });
    let open: string[];
    try {
      open = await databases.lockPlatformDatabase();
    } catch (error) {
      throw new Error('the control plane could not close the platform database to agent roles (REVOKE CONNECT … FROM PUBLIC): it needs to own that database', {
        cause: error,
      });
    }
    if (open.length) {
      logger.warn(
        { databases: open },
        `agent roles can connect to ${open.join(' and ')} (read nothing of the platform there): close them with REVOKE CONNECT ON DATABASE … FROM PUBLIC as their owner`,
      );
    }
    // Agent servers reach Redis as users of their own (BERTH_AGENT_REDIS=acl), or not at all (off:
    // their queues and run events stay in their own database).
    agentRedis =
      settings.redisUrl && settings.agentRedis !== 'off'
        ? new AgentRedis({
            url: settings.redisUrl,
            secretBox: new SecretBox(settings.secretKey),
            log: logger,
            ...(settings.agentRedisResyncMs ? { resyncIntervalMs: settings.agentRedisResyncMs } : {}),
          })
        : undefined;
    await agentRedis?.start(async () => (await store.activeRevisions()).map((r) => r.deployment_id));
    pipeline = new RevisionPipeline(
      {
        store,
        databaseUrl: config.databaseUrl,
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
      },
      {
        ...(config.clock ? { clock: config.clock } : {}),
        ...settings.pipeline,
        ...(settings.unusedUploadTtlSeconds ? { unusedUploadTtlSeconds: settings.unusedUploadTtlSeconds } : {}),
      },
    );
    await pipeline.start();
  } catch (error) {
    // What did start (the artifact endpoint's listener, the queue) must not outlive a failed start.
    await close();
    throw error;
  }
  const limits = { ...DEFAULT_CONTAINER_LIMITS, ...settings.agentLimits };
  return {
    pipeline,
    close,
    streams,
    deployments: new Deployments(store, new SecretBox(settings.secretKey), pipeline, {
      ...(settings.maxDeploymentsPerTenant ? { maxDeploymentsPerTenant: settings.maxDeploymentsPerTenant } : {}),
      ...(settings.maxSecretsPerDeployment ? { maxSecretsPerDeployment: settings.maxSecretsPerDeployment } : {}),
      maxResources: { cpu: limits.maxCpu, memoryMb: limits.maxMemoryMb },
    }),
    ...(settings.deployer?.kind === 'kubernetes' ? {} : { isolation }),
  };
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
  const clock = config.clock ?? systemClock;
  const notifier = new FlowNotifier({ connectionString: config.databaseUrl, channel: AUTH_FLOW_CHANNEL, log: logger, clock });
  const store = new AuthFlowStore(database.db, { channel: AUTH_FLOW_CHANNEL, clock });
  const authFlows = new AuthFlows(store, notifier, logger, {
    ...(config.authFlowTtlSeconds ? { defaultTtlSeconds: config.authFlowTtlSeconds } : {}),
    clock,
  });
  let service: RunningGrpcService | undefined;
  let sweeper: Timer | undefined;
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
        if (part) server.add(DeploymentService, deploymentHandlers(part.deployments, part.streams));
      },
    });
    sweeper = clock.setInterval(() => {
      store.sweep().catch((error: unknown) => logger.warn({ err: error }, 'sweeping login flows failed'));
    }, config.sweepIntervalMs ?? 60_000);
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
    ...(deploymentsPart ? { deployments: deploymentsPart.deployments, revisionLogs: deploymentsPart.streams.logs } : {}),
    ...(deploymentsPart?.isolation ? { isolation: deploymentsPart.isolation } : {}),
    close: async () => {
      sweeper?.cancel();
      await deploymentsPart?.close();
      // Waiters answer `pending` at once, so the server does not have to cancel their calls.
      await notifier.close();
      await grpc.close();
      await database.close();
    },
  };
}
