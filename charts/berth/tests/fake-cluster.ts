/**
 * What the chart tests need of the fake cluster beyond its API: a kubeconfig pointing helm (or a
 * service run outside the cluster) at it, and the environment Kubernetes would give a container of
 * a stored Deployment (its `envFrom` ConfigMaps and Secrets, then its `env` values and references).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ObjectStore } from '@berth/fake-kube';

/** Writes a kubeconfig (mode 0600) for the API server at `url`, defaulting to `namespace`; returns its path. */
export async function writeKubeconfig(dir: string, url: string, namespace: string): Promise<string> {
  const path = join(dir, 'kubeconfig');
  await writeFile(
    path,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      // client-node refuses a plain-http server unless told there is no TLS to verify.
      clusters: [{ name: 'fake-kube', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'fake-kube', user: {} }],
      contexts: [{ name: 'fake-kube', context: { cluster: 'fake-kube', user: 'fake-kube', namespace } }],
      'current-context': 'fake-kube',
    }),
    { mode: 0o600 },
  );
  return path;
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; configMapKeyRef?: { name: string; key: string; optional?: boolean } };
}
interface Container {
  name: string;
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  env?: EnvVar[];
}

/** A ConfigMap's or Secret's values as strings (a Secret's `data` is base64; `stringData` is not). */
function values(store: ObjectStore, kind: 'configmaps' | 'secrets', namespace: string, name: string): Record<string, string> {
  const object = store.get(kind, namespace, name) as { data?: Record<string, string>; stringData?: Record<string, string> };
  const data = Object.entries(object.data ?? {}).map(([key, value]) => [key, kind === 'secrets' ? Buffer.from(value, 'base64').toString('utf8') : value]);
  return { ...Object.fromEntries(data), ...object.stringData };
}

/**
 * The environment of container `name` (an init container too) of the Deployment `deployment`, as
 * the kubelet resolves it. A missing optional key is left out, as Kubernetes does.
 */
export function containerEnv(store: ObjectStore, namespace: string, deployment: string, name: string): Record<string, string> {
  const pod = (store.get('apps/deployments', namespace, deployment) as unknown as { spec: { template: { spec: { containers: Container[]; initContainers?: Container[] } } } }).spec
    .template.spec;
  const container = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === name);
  if (!container) throw new Error(`${deployment} has no container ${name}`);
  const env: Record<string, string> = {};
  for (const source of container.envFrom ?? []) {
    if (source.configMapRef) Object.assign(env, values(store, 'configmaps', namespace, source.configMapRef.name));
    if (source.secretRef) Object.assign(env, values(store, 'secrets', namespace, source.secretRef.name));
  }
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) {
      env[variable.name] = variable.value;
      continue;
    }
    const ref = variable.valueFrom?.secretKeyRef ?? variable.valueFrom?.configMapKeyRef;
    if (!ref) continue;
    const value = values(store, variable.valueFrom?.secretKeyRef ? 'secrets' : 'configmaps', namespace, ref.name)[ref.key];
    if (value !== undefined) env[variable.name] = value;
    else if (!ref.optional) throw new Error(`${deployment}/${name}: ${variable.name} refers to ${ref.name}/${ref.key}, which does not exist`);
  }
  return env;
}
