export { KubernetesDeployer, type KubernetesDeployerOptions } from './kubernetes-deployer.js';
export {
  AGENT_METRICS_PORT,
  AGENT_PORT,
  ANNOTATIONS,
  LABELS,
  buildDeployment,
  buildManifests,
  buildSecret,
  buildService,
  deploymentLabelSelector,
  objectName,
  serviceUrl,
  type DeploymentManifests,
  type ImageRevisionSpec,
  type ManifestOptions,
} from './manifests.js';
export { buildNetworkPolicy, type AgentNetworkPolicy, type Lookup, type PeerPods, type PlatformEndpoint, type PlatformPods } from './network-policy.js';
