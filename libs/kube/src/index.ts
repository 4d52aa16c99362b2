/**
 * The Kubernetes plumbing that the control plane's deployer and the sandbox-manager's driver share
 * (one library, not two copies): which cluster (a `KubeConfig` or an address and token), what a
 * failed call means, abortable waits, and writes under optimistic concurrency.
 */
export { kubeConfigOf, loadKubeConfig, type KubernetesCluster, type KubernetesServer } from './cluster.js';
export { describeApiError, isStatus } from './errors.js';
export {
  callOptions,
  createOrReplace,
  findObject,
  formatMs,
  poll,
  PollTimeoutError,
  removeObject,
  sleep,
  writable,
  WRITE_ATTEMPTS,
  type ApplyOptions,
  type KindApi,
  type Named,
} from './calls.js';
export { coreKinds, deploymentKind, networkPolicyKind, type CoreKinds } from './kinds.js';
export { labelValue, shortHash } from './labels.js';
