/**
 * An in-repo fake of the Kubernetes API server for tests (no cluster can run on these machines):
 * the real REST paths over node:http, a generic object store, a simulated Deployment
 * controller whose rollouts tests can make succeed, fail or stall, a simulated kubelet for pods
 * (image pull failures included), `pods/exec` over WebSocket backed by host processes (a
 * protocol fake, not isolation: see pod-exec.ts), and what helm needs to install a chart
 * (OpenAPI v3, server-side apply, protobuf release Secrets: discovery.ts, store.ts, protobuf.ts);
 * and what NetworkPolicies let through, as a policy-enforcing network plugin decides (network-policy.ts).
 * For rolling upgrades: rollouts as upstream's controller steps them (rolling-update.ts), pods
 * deleted gracefully, a kubelet running the test's processes with their probes and preStop hooks
 * (kubelet.ts), and Services' endpoints with a kube-proxy that learns of them late (service-proxy.ts).
 */
export { FakeKube, type FakeKubeOptions, type RecordedRequest } from './server.js';
export {
  ObjectStore,
  PATCH_CONTENT_TYPES,
  type ChangeType,
  type DeleteOptions,
  type ListOptions,
  type ResourceRef,
  type StoreEvent,
  type WriteOptions,
} from './store.js';
export {
  DeploymentController,
  type DeploymentControllerOptions,
  type RolloutDecider,
  type RolloutFailure,
  type RolloutOutcome,
} from './deployment-controller.js';
export { podReady, reconcileRollout, templateHash } from './rolling-update.js';
export { Kubelet, type KubeletOptions, type PodRuntime, type RunningPod } from './kubelet.js';
export { ServiceProxy, serviceEndpoints, type ProxiedConnection, type ServiceEndpoint, type ServiceProxyOptions } from './service-proxy.js';
export { PodController, type PodControllerOptions, type PodFailure } from './pod-controller.js';
export { PodLogs } from './pod-logs.js';
export { EXEC_PROTOCOLS, PodExec, type PodExecOptions } from './pod-exec.js';
export { KubeApiError, type KubeStatus, type StatusDetails } from './errors.js';
export { builtinResources, nameError, type NameRule } from './resources.js';
export { matches, parseSelector, type Requirement } from './selectors.js';
export {
  connectionAllowed,
  podEndpoint,
  type Connection,
  type Endpoint,
  type LabelSelector,
  type NetworkPolicyObject,
  type PodEndpoint,
} from './network-policy.js';
export { apiVersionOf, type FieldError, type KubeObject, type ObjectMeta, type ResourceType } from './types.js';
export { ContainerEnvError, containerEnv, storeEnvSource, type EnvContainer, type EnvSource } from './container-env.js';
