/**
 * The one place the environment becomes each service's config. `berth serve --service <name>` runs
 * one service configured by its own loader (its `env.ts`); the embedded platform of `berth up` and
 * `berth serve` runs every service through the SAME loaders, on the same environment, adding only
 * what the platform provides for itself (its Postgres, its key, its per-start token, loopback gRPC
 * ports). So a setting a service documents (`BULK_EXPORT_*`, `SANDBOX_*`, `UNUSED_UPLOAD_TTL_SECONDS`
 * …) means the same in both modes, and a new one needs no plumbing here.
 */
import type { ControlPlaneConfig } from '@berth/control-plane';
import { loadExportWorkerConfig, type ExportWorkerConfig } from '@berth/export-worker';
import { loadGatewayConfig, type GatewayConfig } from '@berth/gateway';
import { loadSandboxManagerConfig, type SandboxManagerConfig } from '@berth/sandbox-manager';
import { join } from 'node:path';
import { controlPlaneConfig } from './control-plane-config.js';

type Env = Readonly<Record<string, string | undefined>>;

/** What the embedded platform provides for itself, whatever the environment says. */
export interface EmbeddedPlatform {
  databaseUrl: string;
  /** The key in the state folder (`secret-key`): it seals what is already stored, so no setting replaces it. */
  secretKey: string;
  /** This start's token for the internal gRPC calls. */
  internalToken: string;
  logLevel: string;
  stateDir: string;
  /** Where the gateway listens (BERTH_HOST, BERTH_PORT of the CLI). */
  host: string;
  port: number;
}

/**
 * The environment the embedded platform's services are loaded from: the user's, under what the
 * platform provides (its own Postgres, key, token and loopback gRPC ports win over any setting),
 * over the embedded defaults (used only when the variable is unset).
 */
export function embeddedServiceEnv(env: Env, platform: EmbeddedPlatform): Record<string, string | undefined> {
  const defaults: Record<string, string> = {
    // Builds live in the state folder, beside the platform's other data.
    BERTH_ARTIFACTS_DIR: join(platform.stateDir, 'artifacts'),
    // On one machine the operator is the user: a local MinIO or S3 server is a fine destination.
    BULK_EXPORT_ALLOW_PRIVATE_ENDPOINTS: 'true',
  };
  const provided: Record<string, string> = {
    DATABASE_URL: platform.databaseUrl,
    BERTH_SECRET_KEY: platform.secretKey,
    BERTH_INTERNAL_TOKEN: platform.internalToken,
    LOG_LEVEL: platform.logLevel,
    // Internal services answer on loopback only, on ports the OS picks; the gateway finds them itself.
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: '0',
    GATEWAY_HOST: platform.host,
    GATEWAY_PORT: String(platform.port),
  };
  const unsetOrEmpty = (key: string) => env[key] === undefined || env[key] === '';
  return {
    ...env,
    ...Object.fromEntries(Object.entries(defaults).filter(([key]) => unsetOrEmpty(key))),
    ...provided,
  };
}

/** Every service's config for the embedded platform, each from its own loader. */
export interface EmbeddedServiceConfigs {
  controlPlane: ControlPlaneConfig;
  sandboxManager: SandboxManagerConfig;
  exportWorker: ExportWorkerConfig;
  /** Its `services` (the internal services' addresses) are known only once they listen. */
  gateway: GatewayConfig;
}

export function embeddedServiceConfigs(env: Env, platform: EmbeddedPlatform): EmbeddedServiceConfigs {
  const serviceEnv = embeddedServiceEnv(env, platform);
  return {
    controlPlane: controlPlaneConfig(serviceEnv),
    sandboxManager: loadSandboxManagerConfig(serviceEnv),
    exportWorker: loadExportWorkerConfig(serviceEnv),
    gateway: loadGatewayConfig(serviceEnv),
  };
}
