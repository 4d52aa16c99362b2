// Golden tests of a sandbox instance's Kubernetes objects: each case must equal the JSON committed
// in __golden__/. After an intended change, regenerate with
//   UPDATE_GOLDEN=1 node scripts/run-tests.mjs services/sandbox-manager/src/drivers/kubernetes/manifests
// and review the diff of __golden__/ like code.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { ObjectStore, type KubeObject } from '@berth/fake-kube';
import type { ImageInfo, InstanceSpec } from '../driver.js';
import { InstanceError } from '../driver.js';
import {
  buildManifests,
  CA_CERT_PATH,
  EGRESS_LOCK_CONTAINER,
  nonRootUid,
  PROXY_CONFIG_DIR,
  PROXY_CONTAINER,
  PROXY_UID,
  SANDBOX_CONTAINER,
  type ManifestOptions,
} from './manifests.js';

const GOLDEN_DIR = new URL('./__golden__/', import.meta.url);
// Test-only switch (the golden workflow), not service configuration.
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

const CA = {
  certPem: '-----BEGIN CERTIFICATE-----\nTEST-CA\n-----END CERTIFICATE-----\n',
  keyPem: '-----BEGIN PRIVATE KEY-----\nTEST-KEY\n-----END PRIVATE KEY-----\n',
};
const OPTIONS: ManifestOptions = { namespace: 'berth-sandboxes', platformImage: 'ghcr.io/berth/platform:1.2.3', proxyCa: CA };

const CASES: Record<string, { spec: InstanceSpec; options: ManifestOptions; image?: ImageInfo }> = {
  minimal: {
    spec: {
      instance: 'berth-sbx-0a1b2c3d4e5f',
      tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
      image: { reference: 'python:3.12-slim' },
      resources: {},
      volumes: [],
      egress: { rules: [], allowList: [], denyList: [], privateAllow: [] },
      env: {},
      labels: {},
    },
    options: OPTIONS,
  },
  full: {
    spec: {
      instance: 'berth-sbx-9f8e7d6c5b4a',
      tenantId: 'c2a8e0f4-7b6d-4e5f-9a1b-3c4d5e6f7a8b',
      image: { reference: 'registry.example.com/team/tool:1', credentials: { server: 'registry.example.com', username: 'bot', password: 's3cret' } },
      resources: { cpuMillis: 1500, memoryBytes: 512 * 1024 ** 2, storageBytes: 2 * 1024 ** 3 },
      volumes: [
        { volume: 'vol-t1-data', mountPath: '/data', sizeBytes: 5 * 1024 ** 3 },
        { volume: 'vol-t1-cache', mountPath: '/cache' },
      ],
      egress: {
        rules: [{ name: 'openai', matchHosts: ['api.openai.com'], headers: [{ name: 'Authorization', value: 'Bearer sk-opaque' }] }],
        allowList: ['api.openai.com', '*.pypi.org'],
        denyList: [],
        privateAllow: ['10.20.0.0/16'],
      },
      env: { LANG: 'C.UTF-8', HTTP_PROXY: 'http://elsewhere:8080' },
      labels: { 'berth.dev/pool': 'pool-1', 'berth.dev/template-hash': 'abc123' },
    },
    options: { ...OPTIONS, runtimeClassName: 'gvisor', storageClassName: 'fast' },
    image: { user: '1000', workingDir: '/work' },
  },
};

function golden(name: string): URL {
  return new URL(`${name}.json`, GOLDEN_DIR);
}

describe('sandbox instance manifests (golden)', () => {
  for (const [name, { spec, options, image }] of Object.entries(CASES)) {
    it(`matches __golden__/${name}.json`, () => {
      const actual = JSON.stringify(buildManifests(spec, options, image), null, 2) + '\n';
      if (UPDATE) writeFileSync(golden(name), actual);
      const expected = readFileSync(golden(name), 'utf8');
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

  it('produces objects the API server accepts', () => {
    const store = new ObjectStore();
    store.create('namespaces', undefined, { metadata: { name: OPTIONS.namespace } });
    for (const { spec, options, image } of Object.values(CASES)) {
      const m = buildManifests(spec, options, image);
      const asObject = (o: unknown) => JSON.parse(JSON.stringify(o)) as KubeObject;
      store.create('pods', options.namespace, asObject(m.pod));
      store.create('secrets', options.namespace, asObject(m.proxySecret));
      if (m.pullSecret) store.create('secrets', options.namespace, asObject(m.pullSecret));
      store.create('networking.k8s.io/networkpolicies', options.namespace, asObject(m.networkPolicy));
      store.create('configmaps', options.namespace, asObject(m.record));
      for (const claim of m.volumeClaims) store.create('persistentvolumeclaims', options.namespace, asObject(claim));
    }
    expect(store.list('pods', OPTIONS.namespace)).toHaveLength(2);
  });
});

describe('what a sandbox pod gets', () => {
  const full = CASES['full']!;
  const manifests = buildManifests(full.spec, full.options, full.image);
  const pod = manifests.pod.spec!;
  const sandbox = pod.containers.find((c) => c.name === SANDBOX_CONTAINER)!;
  const proxy = pod.containers.find((c) => c.name === PROXY_CONTAINER)!;

  it("the sandbox's image is pulled at every start: the registry, not a node's cache, decides who may run it", () => {
    expect(sandbox.imagePullPolicy).toBe('Always');
  });

  it('the proxy config (header values, CA key) only in the sidecar, never in the sandbox container', () => {
    expect(proxy.volumeMounts).toEqual([{ name: 'proxy-config', mountPath: PROXY_CONFIG_DIR, readOnly: true }]);
    const sandboxVolumes = new Set(sandbox.volumeMounts!.map((m) => m.name));
    const secretVolumes = pod.volumes!.filter((v) => v.secret).map((v) => v.name);
    expect(secretVolumes.filter((v) => sandboxVolumes.has(v))).toEqual([]);
    expect(JSON.stringify(manifests.pod)).not.toContain('sk-opaque');
    expect(JSON.stringify(manifests.pod)).not.toContain('TEST-KEY');
    const config = JSON.parse(manifests.proxySecret.stringData!['config.json']!) as { listen: string; policy: unknown };
    expect(config).toMatchObject({ listen: '127.0.0.1:3128', policy: full.spec.egress });
  });

  it('routes through the proxy whatever the spec says, and trusts the Berth CA', () => {
    const env = Object.fromEntries(sandbox.env!.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({
      HTTP_PROXY: 'http://127.0.0.1:3128',
      HTTPS_PROXY: 'http://127.0.0.1:3128',
      LANG: 'C.UTF-8',
      NODE_EXTRA_CA_CERTS: CA_CERT_PATH,
    });
  });

  it('no token, no service links, no escalation or capabilities, RuntimeDefault seccomp, non-root for a uid image', () => {
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.enableServiceLinks).toBe(false);
    expect(pod.shareProcessNamespace).toBe(false);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } });
    for (const c of pod.containers) expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    expect(pod.runtimeClassName).toBe('gvisor');
    const minimal = buildManifests(CASES['minimal']!.spec, OPTIONS).pod.spec!;
    expect(minimal.securityContext!.runAsNonRoot).toBeUndefined();
  });

  it("locks the pod's egress to the proxy's uid in an init container that alone has NET_ADMIN", () => {
    const [lock, ...others] = pod.initContainers!;
    expect(others).toEqual([]);
    expect(lock).toMatchObject({
      name: EGRESS_LOCK_CONTAINER,
      image: OPTIONS.platformImage,
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'], add: ['NET_ADMIN', 'NET_RAW'] } },
    });
    const script = lock!.command!.join(' ');
    expect(script).toContain(`--uid-owner ${PROXY_UID} -j ACCEPT`);
    expect(script).toContain('-o lo -j ACCEPT');
    expect(script).toContain('-A OUTPUT -j REJECT');
    expect(proxy.securityContext).toMatchObject({ runAsUser: PROXY_UID });
    for (const c of pod.containers) expect(c.securityContext!.capabilities!.add).toBeUndefined();
    expect(buildManifests(full.spec, { ...full.options, egressLock: false }, full.image).pod.spec!.initContainers).toBeUndefined();
  });

  it("refuses to run a sandbox as the proxy's uid while the egress lock lets that uid out", () => {
    expect(() => buildManifests(full.spec, full.options, { user: String(PROXY_UID), workingDir: '' })).toThrow(InstanceError);
    expect(() => buildManifests(full.spec, { ...full.options, runAsUser: PROXY_UID }, full.image)).toThrow(/the auth proxy's/);
  });

  it('takes a uid user as non-root, not root or a name the kubelet cannot check', () => {
    expect([nonRootUid('1000'), nonRootUid('1000:1000'), nonRootUid('0'), nonRootUid(''), nonRootUid('node'), nonRootUid(undefined)]).toEqual([
      1000,
      1000,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
  });
});
