/** Which cluster to talk to. */
import { KubeConfig } from '@kubernetes/client-node';

/** A cluster given by address: the API server URL and, usually, a bearer token. */
export interface KubernetesServer {
  /** The API server, e.g. `https://10.0.0.1:6443`. */
  server: string;
  token?: string;
  /** Base64 PEM of the CA that signed the server's certificate. */
  caData?: string;
  /**
   * Skip TLS verification (test clusters only). A plain `http://` server (`kubectl proxy`) has no
   * TLS to verify, and client-node refuses it unless this is set, so it is then set for it.
   * @default false for https, true for http
   */
  skipTLSVerify?: boolean;
}

/** A loaded `KubeConfig` (in-cluster or a kubeconfig file), or an address and token. */
export type KubernetesCluster = KubeConfig | KubernetesServer;

/** The `KubeConfig` of a cluster given either way; its `makeApiClient(CoreV1Api)` gives the typed clients. */
export function kubeConfigOf(cluster: KubernetesCluster): KubeConfig {
  if (cluster instanceof KubeConfig) return cluster;
  const kc = new KubeConfig();
  const { server, token, caData, skipTLSVerify } = cluster;
  kc.loadFromClusterAndUser(
    { name: 'berth', server, skipTLSVerify: skipTLSVerify ?? server.startsWith('http://'), ...(caData ? { caData } : {}) },
    { name: 'berth', ...(token ? { token } : {}) },
  );
  return kc;
}

/**
 * The cluster a service runs against: the kubeconfig file at `path` (a service run outside the
 * cluster, e.g. `KUBECONFIG`), else the pod's own service account (in-cluster).
 */
export function loadKubeConfig(path?: string): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromCluster();
  return kc;
}
