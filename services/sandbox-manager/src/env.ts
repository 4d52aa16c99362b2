/**
 * The sandbox-manager's environment (DATABASE_URL, BERTH_SECRET_KEY, GRPC_HOST, GRPC_PORT, LOG_LEVEL,
 * BERTH_INTERNAL_TOKEN, BERTH_SANDBOX_PRIVATE_EGRESS, BERTH_PLATFORM_IMAGE, SANDBOX_*): the only place
 * it reads process.env. `start()` builds the driver from `sandboxes.driver`.
 */
import { envCidrList, envList, parseEnv, parseGrpcServerEnv } from '@berth/config';
import { z } from 'zod';
import type { SandboxManagerConfig } from './config.js';
import type { DriverConfig } from './drivers/build-driver.js';

// Re-exported: the CLI parses the same variables for `berth serve`.
export { envCidrList, envList };

const schema = z.object({
  DATABASE_URL: z.string().min(1),
  /** 32 bytes, base64: seals registry passwords and opaque proxy header values. */
  BERTH_SECRET_KEY: z.string().min(1),
  /** Private CIDRs sandboxes may reach through the auth proxy (everything else private is refused). */
  BERTH_SANDBOX_PRIVATE_EGRESS: envCidrList,
  /** container (Docker Engine API), kubernetes, or none (sandbox calls answer 503). */
  SANDBOX_DRIVER: z.enum(['container', 'kubernetes', 'none']).default('none'),
  /** The Docker Engine API socket of the container driver (Docker's, or `podman system service`'s). */
  SANDBOX_DOCKER_SOCKET: z.string().default('/var/run/docker.sock'),
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
}).refine((e) => e.SANDBOX_DRIVER !== 'kubernetes' || e.BERTH_PLATFORM_IMAGE, {
  message: 'the kubernetes sandbox driver needs BERTH_PLATFORM_IMAGE (the image with the auth proxy sidecar)',
  path: ['BERTH_PLATFORM_IMAGE'],
});

function driverConfig(e: z.infer<typeof schema>): DriverConfig | undefined {
  if (e.SANDBOX_DRIVER === 'container') return { kind: 'container', socketPath: e.SANDBOX_DOCKER_SOCKET, runDir: e.SANDBOX_RUN_DIR };
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
      ...(driver ? { driver } : {}),
      ...(e.SANDBOX_DEFAULT_IMAGE ? { defaultImage: e.SANDBOX_DEFAULT_IMAGE } : {}),
    },
  };
}
