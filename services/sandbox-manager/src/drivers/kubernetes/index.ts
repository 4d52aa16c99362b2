export { KubernetesDriver, type KubernetesDriverOptions } from './kubernetes-driver.js';
export { buildManifests, INSTANCE_SELECTOR, LABELS, type InstanceManifests, type ManifestOptions } from './manifests.js';
