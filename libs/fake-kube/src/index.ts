/**
 * An in-repo fake of the Kubernetes API server for tests (no cluster can run on these machines):
 * the real REST paths over node:http, a generic object store, and a simulated Deployment
 * controller whose rollouts tests can make succeed, fail or stall.
 */
export { FakeKube, type FakeKubeOptions, type RecordedRequest } from './server.js';
export { ObjectStore, PATCH_CONTENT_TYPES, type ChangeType, type ListOptions, type ResourceRef, type StoreEvent, type WriteOptions } from './store.js';
export {
  DeploymentController,
  templateHash,
  type DeploymentControllerOptions,
  type RolloutDecider,
  type RolloutFailure,
  type RolloutOutcome,
} from './deployment-controller.js';
export { PodController, type PodControllerOptions, type PodFailure } from './pod-controller.js';
export { PodLogs } from './pod-logs.js';
export { KubeApiError, type KubeStatus, type StatusDetails } from './errors.js';
export { builtinResources, nameError, type NameRule } from './resources.js';
export { matches, parseSelector, type Requirement } from './selectors.js';
export { apiVersionOf, type FieldError, type KubeObject, type ObjectMeta, type ResourceType } from './types.js';
