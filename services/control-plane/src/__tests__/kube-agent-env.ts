/**
 * What the kubernetes deployer hands a revision's agent servers, read from the in-repo fake
 * Kubernetes API: the deployment's Secret (its pods take their env from it), decoded.
 */
import type { FakeKube } from '@berth/fake-kube';
import { SecretBox } from '@berth/secret-box';
import { until } from '@berth/testing';

/**
 * The env of a revision's agent servers: the Secret holding that revision's own deployment
 * credential, once the revision wrote it (a later revision of the deployment overwrites it).
 */
export async function kubeAgentEnv(fake: FakeKube, secretKey: string, revisionId: string, namespace = 'berth'): Promise<Record<string, string>> {
  const credential = new SecretBox(secretKey).deploymentCredential(revisionId);
  return until(
    `the Secret of revision ${revisionId}`,
    () =>
      (fake.store.list('secrets', namespace) as { data?: Record<string, string> }[])
        .map((secret) => Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])))
        .find((env) => env.BERTH_DEPLOYMENT_CREDENTIAL === credential),
    30_000,
  );
}
