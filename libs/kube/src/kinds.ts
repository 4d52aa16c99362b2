/**
 * The namespaced kinds Berth writes, each as a {@link KindApi} over its typed client, so that the
 * generic helpers (find, remove, create-or-replace) work on any of them. Every call carries the
 * options `call()` gives (an abort signal, usually).
 */
import type {
  AppsV1Api,
  ConfigurationOptions,
  CoreV1Api,
  NetworkingV1Api,
  V1ConfigMap,
  V1Deployment,
  V1NetworkPolicy,
  V1PersistentVolumeClaim,
  V1Pod,
  V1Secret,
  V1Service,
} from '@kubernetes/client-node';
import type { KindApi } from './calls.js';

export interface CoreKinds {
  pod: KindApi<V1Pod>;
  secret: KindApi<V1Secret>;
  configMap: KindApi<V1ConfigMap>;
  service: KindApi<V1Service>;
  persistentVolumeClaim: KindApi<V1PersistentVolumeClaim>;
}

export function coreKinds(core: CoreV1Api, namespace: string, call: () => ConfigurationOptions): CoreKinds {
  return {
    pod: {
      kind: 'Pod',
      read: (name) => core.readNamespacedPod({ name, namespace }, call()),
      create: (body) => core.createNamespacedPod({ namespace, body }, call()),
      replace: (name, body) => core.replaceNamespacedPod({ name, namespace, body }, call()),
      remove: (name) => core.deleteNamespacedPod({ name, namespace }, call()),
      list: async (labelSelector) => (await core.listNamespacedPod({ namespace, labelSelector }, call())).items,
    },
    secret: {
      kind: 'Secret',
      read: (name) => core.readNamespacedSecret({ name, namespace }, call()),
      create: (body) => core.createNamespacedSecret({ namespace, body }, call()),
      replace: (name, body) => core.replaceNamespacedSecret({ name, namespace, body }, call()),
      remove: (name) => core.deleteNamespacedSecret({ name, namespace }, call()),
      list: async (labelSelector) => (await core.listNamespacedSecret({ namespace, labelSelector }, call())).items,
    },
    configMap: {
      kind: 'ConfigMap',
      read: (name) => core.readNamespacedConfigMap({ name, namespace }, call()),
      create: (body) => core.createNamespacedConfigMap({ namespace, body }, call()),
      replace: (name, body) => core.replaceNamespacedConfigMap({ name, namespace, body }, call()),
      remove: (name) => core.deleteNamespacedConfigMap({ name, namespace }, call()),
      list: async (labelSelector) => (await core.listNamespacedConfigMap({ namespace, labelSelector }, call())).items,
    },
    service: {
      kind: 'Service',
      read: (name) => core.readNamespacedService({ name, namespace }, call()),
      create: (body) => core.createNamespacedService({ namespace, body }, call()),
      replace: (name, body) => core.replaceNamespacedService({ name, namespace, body }, call()),
      remove: (name) => core.deleteNamespacedService({ name, namespace }, call()),
      list: async (labelSelector) => (await core.listNamespacedService({ namespace, labelSelector }, call())).items,
    },
    persistentVolumeClaim: {
      kind: 'PersistentVolumeClaim',
      read: (name) => core.readNamespacedPersistentVolumeClaim({ name, namespace }, call()),
      create: (body) => core.createNamespacedPersistentVolumeClaim({ namespace, body }, call()),
      replace: (name, body) => core.replaceNamespacedPersistentVolumeClaim({ name, namespace, body }, call()),
      remove: (name) => core.deleteNamespacedPersistentVolumeClaim({ name, namespace }, call()),
      list: async (labelSelector) => (await core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector }, call())).items,
    },
  };
}

export function deploymentKind(apps: AppsV1Api, namespace: string, call: () => ConfigurationOptions): KindApi<V1Deployment> {
  return {
    kind: 'Deployment',
    read: (name) => apps.readNamespacedDeployment({ name, namespace }, call()),
    create: (body) => apps.createNamespacedDeployment({ namespace, body }, call()),
    replace: (name, body) => apps.replaceNamespacedDeployment({ name, namespace, body }, call()),
    // Background: the pods go with it, without holding up the call.
    remove: (name) => apps.deleteNamespacedDeployment({ name, namespace, propagationPolicy: 'Background' }, call()),
    list: async (labelSelector) => (await apps.listNamespacedDeployment({ namespace, labelSelector }, call())).items,
  };
}

export function networkPolicyKind(net: NetworkingV1Api, namespace: string, call: () => ConfigurationOptions): KindApi<V1NetworkPolicy> {
  return {
    kind: 'NetworkPolicy',
    read: (name) => net.readNamespacedNetworkPolicy({ name, namespace }, call()),
    create: (body) => net.createNamespacedNetworkPolicy({ namespace, body }, call()),
    replace: (name, body) => net.replaceNamespacedNetworkPolicy({ name, namespace, body }, call()),
    remove: (name) => net.deleteNamespacedNetworkPolicy({ name, namespace }, call()),
    list: async (labelSelector) => (await net.listNamespacedNetworkPolicy({ namespace, labelSelector }, call())).items,
  };
}
