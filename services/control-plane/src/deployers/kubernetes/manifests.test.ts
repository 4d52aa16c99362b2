// Golden tests of the Kubernetes manifests: each case's Secret, Deployment and Service must equal
// the JSON committed in __golden__/. After an intended change, regenerate with
//   UPDATE_GOLDEN=1 node scripts/run-tests.mjs services/control-plane/src/deployers/kubernetes/manifests
// and review the diff of __golden__/ like code.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { ObjectStore } from '@berth/fake-kube';
import { labelValue } from '@berth/kube';
import type { KubeObject } from '@berth/fake-kube';
import {
  AGENT_HOME,
  AGENT_METRICS_PORT,
  AGENT_PORT,
  AGENT_UID,
  ARTIFACT_CREDENTIAL_KEY,
  buildManifests,
  FETCH_CONTAINER_NAME,
  objectName,
  PROJECT_DIR,
  type KubeRevisionSpec,
  type ManifestOptions,
} from './manifests.js';

const GOLDEN_DIR = new URL('./__golden__/', import.meta.url);
// Test-only switch (the golden workflow), not service configuration.
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

const CASES: Record<string, { spec: KubeRevisionSpec; options: ManifestOptions }> = {
  'dev-defaults': {
    spec: {
      deploymentId: '0b6f6c1e-4a39-4a8e-9d0e-2f1f3c1d5a10',
      revisionId: '5d0c8f9e-1b2a-4c3d-8e9f-0a1b2c3d4e5f',
      tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
      name: 'my-agent',
      deploymentType: 'dev',
      artifact: { kind: 'image', imageUri: 'ghcr.io/acme/my-agent:1.0.0' },
      secrets: {},
      env: { DATABASE_URL: 'postgres://berth@db:5432/berth', BERTH_AGENT_SCHEMA: 'agent_0b6f6c1e', LOG_LEVEL: 'info' },
      resources: { replicas: 1 },
    },
    options: { namespace: 'berth' },
  },
  'prod-full': {
    spec: {
      deploymentId: '9e8d7c6b-5a49-4382-9170-6f5e4d3c2b1a',
      revisionId: 'a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d',
      tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
      name: 'support-bot',
      deploymentType: 'prod',
      artifact: { kind: 'image', imageUri: 'registry.internal:5000/team/support-bot@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945' },
      secrets: { OPENAI_API_KEY: 'sk-test-123', ANTHROPIC_API_KEY: 'sk-ant-test', MULTI_LINE: 'line one\nline two ünïcode' },
      env: {
        DATABASE_URL: 'postgres://berth@db:5432/berth',
        BERTH_AGENT_SCHEMA: 'agent_9e8d7c6b',
        REDIS_URL: 'redis://redis:6379/0',
        BERTH_DEPLOYMENT_CREDENTIAL: 'bdc_test_credential',
        LOG_LEVEL: 'warn',
        // The platform's PORT wins over the spec's.
        PORT: '3000',
      },
      resources: { replicas: 3, cpu: 1.5, memoryMb: 3072, workers: 25 },
    },
    options: { namespace: 'agents', imagePullSecrets: ['registry-creds'], serviceAccountName: 'berth-agents' },
  },
  'awkward-name': {
    spec: {
      deploymentId: 'legacy/Deployment ID that is not a label value',
      revisionId: 'rev-0001',
      tenantId: 'tenant_42',
      name: '42-this-name-starts-with-a-digit-and-is-exactly-sixty-three-chr',
      deploymentType: 'dev',
      artifact: { kind: 'image', imageUri: 'agent:latest' },
      secrets: { 'dotted.key': 'v' },
      env: {},
      resources: { replicas: 0, cpu: 0.25, memoryMb: 300.4 },
    },
    options: { namespace: 'berth' },
  },
  // `berth deploy` of a project folder: the agent-server image, with an init container fetching the build.
  'source-revision': {
    spec: {
      deploymentId: '3c2b1a09-8f7e-4d6c-9b5a-4e3d2c1b0a99',
      revisionId: '7f6e5d4c-3b2a-4190-8e7d-6c5b4a392817',
      tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
      name: 'from-a-folder',
      deploymentType: 'dev',
      artifact: {
        kind: 'directory',
        path: '/var/lib/berth/artifacts/3c2b1a09/7f6e5d4c',
        configPath: 'agents/langgraph.json',
        archive: {
          url: 'http://berth-control-plane.berth.svc:8092/v1/artifacts/7f6e5d4c-3b2a-4190-8e7d-6c5b4a392817',
          sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
          credential: 'artifact-credential-of-this-revision',
        },
      },
      secrets: { OPENAI_API_KEY: 'sk-test-123' },
      env: {
        DATABASE_URL: 'postgres://agent_3c2b:pw@db:5432/berth',
        BERTH_AGENT_SCHEMA: 'agent_3c2b1a09',
        BERTH_DEPLOYMENT_CREDENTIAL: 'bdc_test_credential',
        LOG_LEVEL: 'info',
      },
      resources: { replicas: 1 },
    },
    options: { namespace: 'berth', agentServerImage: 'ghcr.io/berth/agent-server:0.1.0' },
  },
};

function golden(name: string): URL {
  return new URL(`${name}.json`, GOLDEN_DIR);
}

describe('kubernetes manifests (golden)', () => {
  for (const [name, { spec, options }] of Object.entries(CASES)) {
    it(`matches __golden__/${name}.json`, () => {
      const actual = JSON.stringify(buildManifests(spec, options), null, 2) + '\n';
      if (UPDATE) writeFileSync(golden(name), actual);
      const expected = readFileSync(golden(name), 'utf8');
      // Compared as parsed JSON for a readable diff, and as text so that key order changes show too.
      expect(JSON.parse(actual)).toEqual(JSON.parse(expected));
      expect(actual).toBe(expected);
    });
  }

  it('has a golden file for every case and no stale ones', () => {
    const files = readdirSync(GOLDEN_DIR)
      .filter((f) => f.endsWith('.json'))
      .sort();
    expect(files).toEqual(
      Object.keys(CASES)
        .map((c) => `${c}.json`)
        .sort(),
    );
  });

  it('produces objects the API server accepts (names, labels, selector, secret keys)', () => {
    const store = new ObjectStore();
    for (const { spec, options } of Object.values(CASES)) {
      if (!store.find('namespaces', undefined, options.namespace)) store.create('namespaces', undefined, { metadata: { name: options.namespace } });
      const m = buildManifests(spec, options);
      const asObject = (o: unknown) => JSON.parse(JSON.stringify(o)) as KubeObject;
      store.create('secrets', options.namespace, asObject(m.secret));
      store.create('apps/deployments', options.namespace, asObject(m.deployment));
      store.create('services', options.namespace, asObject(m.service));
    }
    expect(store.list('apps/deployments', undefined)).toHaveLength(Object.keys(CASES).length);
  });
});

describe("what a deployment's pods get", () => {
  const podSpecs = Object.entries(CASES).map(([name, { spec, options }]) => ({ name, spec, manifests: buildManifests(spec, options) }));

  it("no service-account token, no other Services' addresses", () => {
    for (const { manifests } of podSpecs) {
      const pod = manifests.deployment.spec!.template.spec!;
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.enableServiceLinks).toBe(false);
      expect(pod.containers.flatMap((c) => c.volumeMounts ?? []).map((m) => m.mountPath)).not.toContain('/var/run/secrets/kubernetes.io/serviceaccount');
    }
  });

  it("every value of the spec only in the deployment's own Secret, never as a literal in the Deployment", () => {
    for (const { name, spec, manifests } of podSpecs) {
      const container = manifests.deployment.spec!.template.spec!.containers[0]!;
      // Only the manifest's own, non-secret settings are literals.
      const literals = [
        'BERTH_METRICS_HOST',
        'BERTH_METRICS_PORT',
        'HOME',
        'HOST',
        'N_JOBS_PER_WORKER',
        'PORT',
        ...(spec.artifact.kind === 'directory' ? ['BERTH_AGENT_CONFIG'] : []),
      ];
      expect({ name, env: container.env!.map((e) => e.name).sort() }).toEqual({ name, env: literals.sort() });
      expect(container.env!.every((e) => e.valueFrom === undefined)).toBe(true);
      expect(container.envFrom).toEqual([{ secretRef: { name: manifests.secret.metadata!.name } }]);
      const deploymentJson = JSON.stringify(manifests.deployment);
      const secret = Object.fromEntries(Object.entries(manifests.secret.data!).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
      if (spec.artifact.kind === 'directory') expect(deploymentJson).not.toContain(spec.artifact.archive!.credential);
      for (const [key, value] of Object.entries({ ...spec.secrets, ...spec.env })) {
        if (['PORT', 'HOME', 'N_JOBS_PER_WORKER'].includes(key)) {
          expect(secret).not.toHaveProperty(key);
          continue;
        }
        expect({ name, key, value: secret[key] }).toEqual({ name, key, value: spec.env[key] ?? spec.secrets[key] });
        if (value.length > 4) expect({ name, key, inDeployment: deploymentJson.includes(JSON.stringify(value)) }).toEqual({ name, key, inDeployment: false });
      }
    }
  });

  it("the platform's env wins over a secret of the same name", () => {
    const { spec, options } = CASES['prod-full']!;
    const manifests = buildManifests({ ...spec, secrets: { ...spec.secrets, DATABASE_URL: 'postgres://elsewhere/db' } }, options);
    expect(Buffer.from(manifests.secret.data!['DATABASE_URL']!, 'base64').toString()).toBe(spec.env['DATABASE_URL']);
  });

  it('a metrics port of their own, which their Service does not expose and a secret cannot move', () => {
    const { spec, options } = CASES['prod-full']!;
    // A tenant's secrets naming the metrics settings: to move the listener onto the API port, or hide it on loopback.
    const secrets = { ...spec.secrets, BERTH_METRICS_PORT: String(AGENT_PORT), BERTH_METRICS_HOST: '127.0.0.1' };
    const manifests = buildManifests({ ...spec, secrets }, options);
    const container = manifests.deployment.spec!.template.spec!.containers[0]!;
    expect(AGENT_METRICS_PORT).not.toBe(AGENT_PORT);
    expect(container.ports).toEqual([
      { name: 'http', containerPort: AGENT_PORT, protocol: 'TCP' },
      { name: 'metrics', containerPort: AGENT_METRICS_PORT, protocol: 'TCP' },
    ]);
    expect(container.env).toEqual(
      expect.arrayContaining([
        { name: 'BERTH_METRICS_PORT', value: String(AGENT_METRICS_PORT) },
        { name: 'BERTH_METRICS_HOST', value: '0.0.0.0' },
      ]),
    );
    expect(Object.keys(manifests.secret.data!)).not.toEqual(expect.arrayContaining(['BERTH_METRICS_PORT']));
    expect(Object.keys(manifests.secret.data!)).not.toEqual(expect.arrayContaining(['BERTH_METRICS_HOST']));
    // The gateway proxies to the Service's port: the API's, never the metrics port.
    for (const { manifests: m } of podSpecs) {
      expect(m.service.spec!.ports!.map((p) => [p.port, p.targetPort])).toEqual([[AGENT_PORT, AGENT_PORT]]);
    }
  });

  it('a non-root, unprivileged, capability-less container with a read-only root and writable /tmp and HOME', () => {
    for (const { manifests } of podSpecs) {
      const pod = manifests.deployment.spec!.template.spec!;
      expect(pod.securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: AGENT_UID,
        runAsGroup: AGENT_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(pod.securityContext!.runAsUser).toBeGreaterThan(0);
      const container = pod.containers[0]!;
      expect(container.securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
        privileged: false,
        readOnlyRootFilesystem: true,
        capabilities: { drop: ['ALL'] },
      });
      expect(container.securityContext).not.toHaveProperty('runAsUser', 0);
      const mounts = Object.fromEntries(container.volumeMounts!.filter((m) => m.mountPath !== PROJECT_DIR).map((m) => [m.mountPath, m.name]));
      expect(Object.keys(mounts).sort()).toEqual([AGENT_HOME, '/tmp'].sort());
      expect(container.env!.find((e) => e.name === 'HOME')?.value).toBe(AGENT_HOME);
      for (const volume of Object.values(mounts)) expect(pod.volumes!.find((v) => v.name === volume)?.emptyDir).toBeDefined();
    }
  });
});

describe('a source revision', () => {
  const { spec, options } = CASES['source-revision']!;
  const manifests = buildManifests(spec, options);
  const pod = manifests.deployment.spec!.template.spec!;

  it('runs the agent-server image after an init container fetched the build into a shared emptyDir', () => {
    expect(pod.initContainers!.map((c) => c.name)).toEqual([FETCH_CONTAINER_NAME]);
    const [fetcher] = pod.initContainers!;
    expect(fetcher!.image).toBe(options.agentServerImage);
    expect(pod.containers[0]!.image).toBe(options.agentServerImage);
    expect(pod.volumes!.find((v) => v.name === 'project')!.emptyDir).toEqual({ sizeLimit: '4Gi' });
    expect(fetcher!.volumeMounts).toContainEqual({ name: 'project', mountPath: PROJECT_DIR });
    // The agent server reads what was fetched; only the init container writes it.
    expect(pod.containers[0]!.volumeMounts).toContainEqual({ name: 'project', mountPath: PROJECT_DIR, readOnly: true });
    expect(pod.containers[0]!.env).toContainEqual({ name: 'BERTH_AGENT_CONFIG', value: `${PROJECT_DIR}/agents/langgraph.json` });
    expect(fetcher!.securityContext).toEqual(pod.containers[0]!.securityContext);
  });

  it("gives the init container its checksum and its own credential only, never the deployment's secrets or database login", () => {
    const [fetcher] = pod.initContainers!;
    expect(fetcher!.envFrom).toBeUndefined();
    const env = Object.fromEntries(fetcher!.env!.map((e) => [e.name, e.value ?? e.valueFrom]));
    expect(env).toEqual({
      BERTH_ARTIFACT_DIR: PROJECT_DIR,
      BERTH_ARTIFACT_SHA256: spec.artifact.kind === 'directory' ? spec.artifact.archive.sha256 : '',
      BERTH_ARTIFACT_URL: spec.artifact.kind === 'directory' ? spec.artifact.archive.url : '',
      [ARTIFACT_CREDENTIAL_KEY]: { secretKeyRef: { name: manifests.secret.metadata!.name, key: ARTIFACT_CREDENTIAL_KEY } },
    });
    expect(Buffer.from(manifests.secret.data![ARTIFACT_CREDENTIAL_KEY]!, 'base64').toString()).toBe('artifact-credential-of-this-revision');
  });

  it('is refused without an agent-server image, saying which setting is missing', () => {
    expect(() => buildManifests(spec, { namespace: 'berth' })).toThrow(
      'source revisions need the agent-server image: set BERTH_AGENT_SERVER_IMAGE on the control plane',
    );
  });
});

describe('object names', () => {
  it('are DNS-1035 labels for any deployment name, and differ per deployment id', () => {
    const names = ['a', 'my-agent', '9lives', '---', 'UPPER_and_under', 'x'.repeat(63), `${'a-'.repeat(40)}z`, ''];
    for (const n of names) {
      const a = objectName(n, 'id-1');
      expect(a).toMatch(/^[a-z]([-a-z0-9]*[a-z0-9])?$/);
      expect(a.length).toBeLessThanOrEqual(63);
      expect(objectName(n, 'id-2')).not.toBe(a);
      expect(objectName(n, 'id-1')).toBe(a);
    }
    expect(objectName('my-agent', 'id-1')).toMatch(/^my-agent-[0-9a-f]{6}$/);
  });

  it('keep label values that are valid and hash the others', () => {
    expect(labelValue('0b6f6c1e-4a39-4a8e-9d0e-2f1f3c1d5a10')).toBe('0b6f6c1e-4a39-4a8e-9d0e-2f1f3c1d5a10');
    expect(labelValue('has space')).toMatch(/^h-[0-9a-f]{40}$/);
    expect(labelValue('x'.repeat(64))).toMatch(/^h-/);
  });
});
