/**
 * The sandbox-manager's environment (DATABASE_URL, BERTH_SECRET_KEY, GRPC_HOST, GRPC_PORT, LOG_LEVEL,
 * BERTH_INTERNAL_TOKEN, BERTH_SANDBOX_PRIVATE_EGRESS, BERTH_PLATFORM_IMAGE, SANDBOX_*): the only place
 * it reads process.env. `start()` builds the driver from `sandboxes.driver` and fills in the
 * defaults of limits and quotas that are not set.
 */
import { envCidrList, envList, parseEnv, parseGrpcServerEnv } from '@berth/config';
import { isResourceQuantity, parseQuantity } from '@berth/quantity';
import { z } from 'zod';
import type { SandboxManagerConfig } from './config.js';
import type { DriverConfig } from './drivers/build-driver.js';
import type { SandboxLimits } from './sandboxes/limits.js';
import type { SandboxQuota } from './sandboxes/quota.js';

// Re-exported: the CLI parses the same variables for `berth serve`.
export { envCidrList, envList };

/** A Kubernetes quantity (`512Mi`, `2Gi`, `500m`, `2`) as its amount (bytes, cores); unset or empty: not set. */
const quantity = z
  .string()
  .optional()
  .refine((text) => !text || (isResourceQuantity(text) && parseQuantity(text) > 0), { error: 'a positive quantity, like 512Mi, 2Gi, 500m or 2' })
  .transform((text) => (text ? parseQuantity(text) : undefined));
const count = z.coerce.number().int().min(1).optional();

/**
 * What one sandbox may use and what one tenant's sandboxes may use together (SANDBOX_DEFAULT_*,
 * SANDBOX_MAX_*, SANDBOX_PIDS_LIMIT, SANDBOX_TENANT_MAX_*); unset ones keep the defaults of
 * DEFAULT_LIMITS and DEFAULT_QUOTA. `berth up` reads them here too.
 */
const limitsSchema = z.object({
  SANDBOX_DEFAULT_CPU: quantity,
  SANDBOX_DEFAULT_MEMORY: quantity,
  SANDBOX_DEFAULT_STORAGE: quantity,
  SANDBOX_PIDS_LIMIT: count,
  SANDBOX_MAX_CPU: quantity,
  SANDBOX_MAX_MEMORY: quantity,
  SANDBOX_MAX_STORAGE: quantity,
  SANDBOX_TENANT_MAX_SANDBOXES: count,
  SANDBOX_TENANT_MAX_CPU: quantity,
  SANDBOX_TENANT_MAX_MEMORY: quantity,
});

const defined = <T extends object>(record: T): Partial<T> => Object.fromEntries(Object.entries(record).filter(([, v]) => v !== undefined)) as Partial<T>;
const millis = (cores: number | undefined) => (cores === undefined ? undefined : Math.round(cores * 1000));
const bytes = (amount: number | undefined) => (amount === undefined ? undefined : Math.round(amount));

export function sandboxLimitsFromEnv(env: Record<string, string | undefined> = process.env): { limits: Partial<SandboxLimits>; quota: Partial<SandboxQuota> } {
  const e = parseEnv(limitsSchema, env);
  return {
    limits: defined({
      defaultCpuMillis: millis(e.SANDBOX_DEFAULT_CPU),
      defaultMemoryBytes: bytes(e.SANDBOX_DEFAULT_MEMORY),
      defaultStorageBytes: bytes(e.SANDBOX_DEFAULT_STORAGE),
      pidsLimit: e.SANDBOX_PIDS_LIMIT,
      maxCpuMillis: millis(e.SANDBOX_MAX_CPU),
      maxMemoryBytes: bytes(e.SANDBOX_MAX_MEMORY),
      maxStorageBytes: bytes(e.SANDBOX_MAX_STORAGE),
    }),
    quota: defined({ sandboxes: e.SANDBOX_TENANT_MAX_SANDBOXES, cpuMillis: millis(e.SANDBOX_TENANT_MAX_CPU), memoryBytes: bytes(e.SANDBOX_TENANT_MAX_MEMORY) }),
  };
}

const schema = z
  .object({
    DATABASE_URL: z.string().min(1),
    /** 32 bytes, base64: seals registry passwords and opaque proxy header values. */
    BERTH_SECRET_KEY: z.string().min(1),
    /** Private CIDRs sandboxes may reach through the auth proxy (everything else private is refused). */
    BERTH_SANDBOX_PRIVATE_EGRESS: envCidrList,
    /** container (Docker Engine API), kubernetes, or none (sandbox calls answer 503). */
    SANDBOX_DRIVER: z.enum(['container', 'kubernetes', 'none']).default('none'),
    /** The Docker Engine API socket of the container driver (Docker's, or `podman system service`'s). */
    SANDBOX_DOCKER_SOCKET: z.string().default('/var/run/docker.sock'),
    /**
     * container driver, on an engine that cannot enforce storage limits (overlay on ext4): `enforce`
     * fails every sandbox that has one (and every sandbox gets one: SANDBOX_DEFAULT_STORAGE), `ignore`
     * runs them without.
     */
    SANDBOX_STORAGE_QUOTA: z.enum(['enforce', 'ignore']).default('enforce'),
    /** Where the container driver keeps each sandbox's sockets (bind-mounted into it). */
    SANDBOX_RUN_DIR: z.string().default('/run/berth-sandboxes'),
    /** Image of sandboxes created without a snapshot or template. */
    SANDBOX_DEFAULT_IMAGE: z.string().optional(),
    /** Registries pulled over plain HTTP (host:port, comma-separated). */
    SANDBOX_INSECURE_REGISTRIES: envList,
    /** kubernetes driver: the namespace of sandbox pods (it must exist). */
    SANDBOX_KUBERNETES_NAMESPACE: z.string().min(1).default('berth-sandboxes'),
    /** kubernetes driver: a kubeconfig file (a sandbox manager outside the cluster); unset: the pod's service account. */
    KUBECONFIG: z.string().min(1).optional(),
    /** kubernetes driver: the Berth platform image (its auth proxy runs as each sandbox's sidecar). */
    BERTH_PLATFORM_IMAGE: z.string().min(1).optional(),
    /** kubernetes driver: a RuntimeClass for sandbox pods (gVisor's `runsc`, `kata-qemu`). */
    SANDBOX_RUNTIME_CLASS: z.string().min(1).optional(),
    /** kubernetes driver: the StorageClass of volume claims (the cluster's default when unset). */
    SANDBOX_STORAGE_CLASS: z.string().min(1).optional(),
    /** kubernetes driver: run every sandbox as this uid, whatever its image says. */
    SANDBOX_RUN_AS_USER: z.coerce.number().int().min(1).optional(),
    /**
     * kubernetes driver: `off` drops the init container that locks a pod's egress to its proxy (it
     * needs NET_ADMIN); then only the NetworkPolicy holds a process that ignores HTTP_PROXY.
     */
    SANDBOX_EGRESS_LOCK: z.enum(['on', 'off']).default('on'),
  })
  .refine((e) => e.SANDBOX_DRIVER !== 'kubernetes' || e.BERTH_PLATFORM_IMAGE, {
    message: 'the kubernetes sandbox driver needs BERTH_PLATFORM_IMAGE (the image with the auth proxy sidecar)',
    path: ['BERTH_PLATFORM_IMAGE'],
  });

function driverConfig(e: z.infer<typeof schema>): DriverConfig | undefined {
  if (e.SANDBOX_DRIVER === 'container')
    return { kind: 'container', socketPath: e.SANDBOX_DOCKER_SOCKET, runDir: e.SANDBOX_RUN_DIR, storageQuota: e.SANDBOX_STORAGE_QUOTA };
  if (e.SANDBOX_DRIVER === 'kubernetes') {
    return {
      kind: 'kubernetes',
      namespace: e.SANDBOX_KUBERNETES_NAMESPACE,
      platformImage: e.BERTH_PLATFORM_IMAGE!,
      ...(e.SANDBOX_RUNTIME_CLASS ? { runtimeClassName: e.SANDBOX_RUNTIME_CLASS } : {}),
      ...(e.SANDBOX_STORAGE_CLASS ? { storageClassName: e.SANDBOX_STORAGE_CLASS } : {}),
      ...(e.SANDBOX_RUN_AS_USER ? { runAsUser: e.SANDBOX_RUN_AS_USER } : {}),
      egressLock: e.SANDBOX_EGRESS_LOCK === 'on',
      ...(e.KUBECONFIG ? { kubeconfig: e.KUBECONFIG } : {}),
    };
  }
  return undefined;
}

export function loadSandboxManagerConfig(env: Record<string, string | undefined> = process.env): SandboxManagerConfig {
  const e = parseEnv(schema, env);
  const driver = driverConfig(e);
  return {
    ...parseGrpcServerEnv(env),
    databaseUrl: e.DATABASE_URL,
    secretKey: e.BERTH_SECRET_KEY,
    sandboxes: {
      privateEgress: e.BERTH_SANDBOX_PRIVATE_EGRESS,
      insecureRegistries: e.SANDBOX_INSECURE_REGISTRIES,
      ...sandboxLimitsFromEnv(env),
      ...(driver ? { driver } : {}),
      ...(e.SANDBOX_DEFAULT_IMAGE ? { defaultImage: e.SANDBOX_DEFAULT_IMAGE } : {}),
    },
  };
}
