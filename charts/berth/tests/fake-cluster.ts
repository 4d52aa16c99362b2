/**
 * What the chart tests need of the fake cluster beyond its API: a kubeconfig pointing helm (or a
 * service run outside the cluster) at it, and the environment Kubernetes would give a container of
 * a stored Deployment.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { containerEnv, storeEnvSource, type EnvContainer, type ObjectStore } from '@berth/fake-kube';

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

/**
 * The environment of container `name` (an init container too) of the stored Deployment
 * `deployment`, as the kubelet resolves it.
 */
export function deploymentContainerEnv(store: ObjectStore, namespace: string, deployment: string, name: string): Record<string, string> {
  const pod = (
    store.get('apps/deployments', namespace, deployment) as unknown as {
      spec: { template: { spec: { containers: EnvContainer[]; initContainers?: EnvContainer[] } } };
    }
  ).spec.template.spec;
  const container = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === name);
  if (!container) throw new Error(`${deployment} has no container ${name}`);
  return containerEnv(container, storeEnvSource(store, namespace));
}
