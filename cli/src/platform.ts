/**
 * The whole platform in one Node process (the embedded default): every internal service on its
 * own loopback gRPC port, then the gateway wired to them — the same contracts as in Kubernetes,
 * where each runs as its own Deployment.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseTracingEnv } from '@berth/config';
import { SecretBox, describeIsolation, start as startControlPlane } from '@berth/control-plane';
import { start as startExportWorker } from '@berth/export-worker';
import { start as startGateway } from '@berth/gateway';
import { createLogger, type Logger } from '@berth/log';
import { start as startSandboxManager, type SandboxSettings } from '@berth/sandbox-manager';
import { startTracing } from '@berth/tracing';
import { startSandboxEngine, type PlatformSandboxConfig } from './sandbox-engine.js';
import { embeddedServiceConfigs } from './service-config.js';

export interface PlatformConfig {
  databaseUrl: string;
  host: string;
  /** Gateway port; 0 picks a free one. */
  port: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Queues (and later run events) on Redis; BullMQ's Postgres backend when unset. */
  redisUrl?: string;
  /** How agent servers use `redisUrl` (DeploymentsConfig.agentRedis). @default 'acl' */
  agentRedis?: 'acl' | 'off';
  /**
   * The URL users reach the platform at, for the links the gateway hands out (GatewayConfig.publicUrl).
   * @default the gateway's listening address
   */
  publicUrl?: string;
  /** The platform's state folder: deployment builds and the key that encrypts deployment secrets live here. */
  stateDir: string;
  /** What deployment builds and local agent servers inherit (PATH, HOME, npm settings). */
  processEnv?: Record<string, string>;
  /** @default off (sandbox calls answer 503); `berth serve` asks for the private engine */
  sandboxes?: PlatformSandboxConfig;
  /**
   * The environment the services read their own settings from (`BULK_EXPORT_*`, `SANDBOX_*`…),
   * through the same loaders as `berth serve --service` (service-config.ts).
   * @default {} (every service's defaults)
   */
  serviceEnv?: Readonly<Record<string, string | undefined>>;
}

/** The key deployment secrets and export destination credentials are encrypted with: made on first start, kept (0600) in the state folder. */
async function secretKey(stateDir: string): Promise<string> {
  const file = join(stateDir, 'secret-key');
  try {
    return (await readFile(file, 'utf8')).trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(stateDir, { recursive: true });
    const key = SecretBox.generateKey();
    await writeFile(file, key, { mode: 0o600, flag: 'wx' });
    return key;
  }
}

export interface RunningPlatform {
  url: string;
  port: number;
  /** The gateway's id for this start, also in its `/readyz` body. */
  instanceId: string;
  /** The internal services' gRPC addresses (`host:port`) by name; they answer only the platform. */
  services: Readonly<Record<string, string>>;
  /** One line for people on the sandboxes: their engine and storage quotas, or OFF and why. */
  sandboxes: string;
  /** One line for people on how deployments are contained. */
  isolation: string;
  close(): Promise<void>;
}

interface Closable {
  close(): Promise<void>;
}

export async function startPlatform(
  config: PlatformConfig,
  logger: Logger = createLogger({ name: 'berth', level: config.logLevel }),
): Promise<RunningPlatform> {
  const started: Closable[] = [];
  const closeAll = async () => {
    for (const service of started.reverse()) await service.close().catch((error: unknown) => logger.error({ err: error }, 'close failed'));
  };
  try {
    // A fresh token per start, held in memory only (never printed, logged, or put in an
    // environment a child inherits): deployed graphs on this machine can reach the loopback ports.
    const internalToken = randomBytes(32).toString('base64url');
    // The typed settings of PlatformConfig are environment variables of the services, read by their loaders like the rest.
    const serviceEnv = {
      ...config.serviceEnv,
      ...(config.redisUrl ? { REDIS_URL: config.redisUrl } : {}),
      ...(config.agentRedis ? { BERTH_AGENT_REDIS: config.agentRedis } : {}),
      ...(config.publicUrl ? { BERTH_PUBLIC_URL: config.publicUrl } : {}),
    };
    const configs = embeddedServiceConfigs(serviceEnv, {
      databaseUrl: config.databaseUrl,
      secretKey: await secretKey(config.stateDir),
      internalToken,
      logLevel: config.logLevel,
      stateDir: config.stateDir,
      host: config.host,
      port: config.port,
    });
    const services: Record<string, string> = {};
    // One provider for the process's services (they share it: `service.name` berth), started
    // before them and stopped after them, so their last spans are exported.
    const tracing = await startTracing(parseTracingEnv(serviceEnv), 'berth', (message) => logger.warn({ detail: message }, 'trace export failed'));
    started.push({ close: () => tracing.shutdown() });
    // Started first, so closed last: the sandbox-manager stops its sandboxes before the engine goes.
    const sandboxEngine = await startSandboxEngine(config.sandboxes, config.stateDir, logger);
    started.push(sandboxEngine);
    // Agent servers trace their runs through the gateway, which starts after the control plane:
    // the control plane waits for its address when a revision deploys.
    const gatewayReached = deferred<string>();
    const { controlPlane, sandboxManager, exportWorker } = configs;
    let isolation = '';
    const starters: Record<string, (logger: Logger) => Promise<Closable & { address: string }>> = {
      // The control plane keeps its own schema (login flows, later deployments) in the same Postgres.
      'control-plane': async (logger) => {
        const plane = await startControlPlane(
          {
            ...controlPlane,
            deployments: {
              ...controlPlane.deployments!,
              processEnv: config.processEnv ?? {},
              agentLogLevel: config.logLevel,
              tracingEndpoint: () => gatewayReached.promise,
              // Deployments' agent servers run in containers on the sandboxes' engine, when it runs.
              ...(sandboxEngine.podmanCommand ? { agentEngine: sandboxEngine.podmanCommand } : {}),
            },
          },
          logger,
        );
        if (plane.isolation) isolation = describeIsolation(plane.isolation);
        return plane;
      },
      'sandbox-manager': (logger) =>
        startSandboxManager({ ...sandboxManager, sandboxes: withEngine(sandboxManager.sandboxes, sandboxEngine.settings) }, logger),
      'export-worker': (logger) => startExportWorker(exportWorker, logger),
    };
    for (const [name, startService] of Object.entries(starters)) {
      const service = await startService(createLogger({ name, level: config.logLevel }));
      started.push(service);
      services[name] = service.address;
    }
    // Closed before the control plane: a revision waiting for the gateway's address gives up first.
    started.push({ close: async () => gatewayReached.reject(new Error('the platform stopped before its gateway started')) });
    const gateway = await startGateway(
      {
        ...configs.gateway,
        services,
      },
      createLogger({ name: 'gateway', level: config.logLevel }),
    );
    started.push(gateway);
    gatewayReached.resolve(localUrl(config.host, gateway.port, gateway.url));
    return { url: gateway.url, port: gateway.port, instanceId: gateway.instanceId, services, sandboxes: sandboxEngine.summary, isolation, close: closeAll };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * The sandbox-manager's settings from its environment, on the platform's engine: the engine decides
 * the driver (or why there is none); SANDBOX_DEFAULT_IMAGE, when set, still wins over its busybox.
 */
function withEngine(settings: SandboxSettings | undefined, engine: SandboxSettings): SandboxSettings {
  const { driver: _ignored, ...fromEnv } = settings ?? {};
  return { ...fromEnv, ...engine, ...(fromEnv.defaultImage ? { defaultImage: fromEnv.defaultImage } : {}) };
}

/** How a process on this machine reaches a server listening on `host` (a wildcard address is reached on loopback). */
function localUrl(host: string, port: number, url: string): string {
  return host === '0.0.0.0' || host === '::' ? `http://127.0.0.1:${port}` : url;
}

function deferred<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: Error): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<T>((ok, fail) => {
    resolve = ok;
    reject = fail;
  });
  // Rejected only when the platform stops; nobody may be waiting then.
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}
