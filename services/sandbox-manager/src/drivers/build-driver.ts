/**
 * Builds the configured sandbox driver (env.ts says which): both kinds need the platform's proxy
 * CA, which lives in the database, so the driver is made in `start()` rather than by its caller.
 */
import type { Kysely } from '@berth/db';
import { loadKubeConfig, type KubernetesCluster } from '@berth/kube';
import type { Logger } from '@berth/log';
import type { SecretBox } from '@berth/secret-box';
import { loadProxyCa } from '../proxy/ca-store.js';
import { ProxyHost } from '../proxy/proxy-host.js';
import type { SandboxTables } from '../tables.js';
import { ContainerDriver } from './container/container-driver.js';
import type { SandboxDriver } from './driver.js';
import { KubernetesDriver } from './kubernetes/kubernetes-driver.js';

export interface ContainerDriverConfig {
  kind: 'container';
  /** The Docker Engine API socket (Docker's, or `podman system service`'s). */
  socketPath: string;
  /** Host folder of the sandboxes' run folders (agent and proxy sockets). */
  runDir: string;
  /** @default 'enforce' (see ContainerDriverOptions.storageQuota) */
  storageQuota?: 'enforce' | 'ignore';
  /** Extra CAs the auth proxy trusts for upstream HTTPS (a private CA of the operator's, tests' servers). */
  upstreamCa?: string[];
}

export interface KubernetesDriverConfig {
  kind: 'kubernetes';
  /** @default the kubeconfig file at `kubeconfig`, else the in-cluster service account */
  cluster?: KubernetesCluster;
  /** A kubeconfig file, for a sandbox manager run outside the cluster. */
  kubeconfig?: string;
  /** @default 'berth-sandboxes' */
  namespace?: string;
  /** The Berth platform image, whose proxy sidecar runs next to each sandbox. */
  platformImage: string;
  runtimeClassName?: string;
  storageClassName?: string;
  runAsUser?: number;
  /** @default true (see ManifestOptions.egressLock) */
  egressLock?: boolean;
}

export type DriverConfig = ContainerDriverConfig | KubernetesDriverConfig;

/** `pidsLimit`: most processes of one sandbox (the container driver's; see SandboxLimits.pidsLimit). */
export async function buildDriver(
  config: DriverConfig,
  deps: { db: Kysely<SandboxTables>; box: SecretBox; logger: Logger; pidsLimit?: number },
): Promise<SandboxDriver> {
  const ca = await loadProxyCa(deps.db, deps.box);
  const logger = deps.logger.child({ driver: config.kind });
  if (config.kind === 'container') {
    const proxy = new ProxyHost({ ca, logger, ...(config.upstreamCa ? { upstreamCa: config.upstreamCa } : {}) });
    return new ContainerDriver({
      socketPath: config.socketPath,
      runDir: config.runDir,
      proxy,
      logger,
      ...(config.storageQuota ? { storageQuota: config.storageQuota } : {}),
      ...(deps.pidsLimit ? { pidsLimit: deps.pidsLimit } : {}),
    });
  }
  const { kind: _kind, cluster, kubeconfig, ...options } = config;
  return new KubernetesDriver({ ...options, cluster: cluster ?? loadKubeConfig(kubeconfig), proxyCa: { certPem: ca.certPem, keyPem: ca.keyPem } });
}
