/**
 * A source deploy on Kubernetes, run under Podman with the real agent-server image: the control
 * plane's own builder builds examples/echo-agent, its ArtifactStore archives the build in S3
 * (s3rver), its artifact endpoint serves it with the revision's credential, and the kubernetes
 * deployer's manifests for that revision are run as they are (pod.ts): the init container fetches,
 * verifies and unpacks the project into the pod's volume, then the agent server serves it from
 * that volume, read-only, against the deployment's own Postgres database and login.
 *
 * The pod reaches this machine's loopback (Postgres, the artifact endpoint) as 10.0.2.2 through
 * slirp4netns, the way a pod reaches the control plane's and Postgres's Services: by the address
 * the control plane is configured with for agents (BERTH_ARTIFACTS_URL, the agent database URL).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Client } from '@langchain/langgraph-sdk';
import { create as createTar } from 'tar';
import {
  AgentDatabases,
  ArtifactStore,
  ProjectBuilder,
  agentSchema,
  artifactCredential,
  artifactPath,
  buildManifests,
  startArtifactServer,
  type SourceRevisionSpec,
} from '@berth/control-plane';
import { DEPLOYMENT_CREDENTIAL_HEADER } from '@berth/http';
import { freePort } from '@berth/local-stack';
import { createLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, createTestDatabase, testS3, until, type TestDatabase } from '@berth/testing';
import { agentServerImage, root, useImages } from './images.js';
import { createPodVolumes, podmanRunArgs, type PodOptions } from './pod.js';

const { podman } = useImages();
/** This machine's loopback as a slirp4netns container sees it. */
const HOST_LOOPBACK = '10.0.2.2';
const NETWORK = 'slirp4netns:allow_host_loopback=true';

const secretBox = new SecretBox(SecretBox.generateKey());
const deploymentId = randomUUID();
const revisionId = randomUUID();
const s3 = testS3();
let work: string;
let platformDb: TestDatabase;
let databases: AgentDatabases;
let store: ArtifactStore;
let server: Awaited<ReturnType<typeof startArtifactServer>>;
/** What the control plane recorded for the revision (the artifact endpoint looks it up). */
const recorded = new Map<string, { key: string; sha256: string }>();
let spec: SourceRevisionSpec;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'berth-images-deploy-'));
  // `berth deploy` uploads the project folder as a tarball; the builder unpacks and installs it.
  const project = join(work, 'echo-agent');
  await cp(join(root, 'examples/echo-agent'), project, { recursive: true });
  const tarball = join(work, 'upload.tar.gz');
  await pipeline(createTar({ gzip: true, cwd: project, portable: true }, ['.']) as unknown as Readable, createWriteStream(tarball));
  const builder = new ProjectBuilder({
    artifactsDir: join(work, 'artifacts'),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? work },
  });
  const built = await builder.build({ tarball: { path: tarball }, deploymentId, revisionId });
  expect(built.graphs).toEqual(['echo']);

  store = new ArtifactStore({
    bucket: await createTestBucket('images-artifacts'),
    endpoint: s3.endpoint,
    region: s3.region,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
  const stored = await store.put(deploymentId, revisionId, built.path);
  recorded.set(revisionId, stored);
  server = await startArtifactServer({
    lookup: async (id) => recorded.get(id),
    artifacts: store,
    secretBox,
    host: '127.0.0.1',
    port: 0,
    log: createLogger({ name: 'artifact-server', level: 'warn' }),
  });

  // The platform's database (a superuser on it provisions the deployment's own database and login).
  platformDb = await createTestDatabase('images_agent_platform');
  const agentUrl = new URL(platformDb.url);
  agentUrl.hostname = HOST_LOOPBACK;
  databases = new AgentDatabases({ adminUrl: platformDb.url, agentUrl: agentUrl.toString() });

  // The revision spec as the control plane's pipeline makes it for a source revision with an archive.
  spec = {
    deploymentId,
    revisionId,
    tenantId: randomUUID(),
    name: 'echo-from-source',
    deploymentType: 'dev',
    artifact: {
      kind: 'directory',
      path: built.path,
      configPath: built.configPath,
      archive: {
        url: `http://${HOST_LOOPBACK}:${new URL(server.url).port}${artifactPath(revisionId)}`,
        sha256: stored.sha256,
        credential: artifactCredential(secretBox, revisionId),
      },
    },
    secrets: { ECHO_GREETING: 'unused by the graph, present as a deployment secret' },
    env: {
      LOG_LEVEL: 'info',
      DATABASE_URL: (await databases.provision(deploymentId)).url,
      BERTH_AGENT_SCHEMA: agentSchema(deploymentId),
      BERTH_DEPLOYMENT_CREDENTIAL: secretBox.deploymentCredential(revisionId),
    },
    resources: { replicas: 1 },
  };
}, 10 * 60_000);

afterAll(async () => {
  await server?.close();
  store?.close();
  await databases?.drop(deploymentId);
  await platformDb?.drop();
  await rm(work, { recursive: true, force: true });
}, 60_000);

/** The `podman run` arguments of the revision's pod (init container and agent server), from its manifests. */
async function podOf(revision: SourceRevisionSpec, name: string, publish?: Record<number, number>) {
  const manifests = buildManifests(revision, { namespace: 'berth', agentServerImage });
  const pod = manifests.deployment.spec!.template.spec!;
  const options: PodOptions = { name, pod, secret: manifests.secret, network: NETWORK, ...(publish ? { publish } : {}) };
  expect(pod.initContainers).toHaveLength(1);
  const volumes = await createPodVolumes(podman, options);
  return {
    init: podmanRunArgs(pod.initContainers![0]!, options),
    main: podmanRunArgs(pod.containers[0]!, options),
    projectVolume: volumes.find((volume) => volume.endsWith('-project'))!,
  };
}

/** Runs a container to its end: its exit code and everything it wrote. */
async function runToEnd(args: string[]): Promise<{ code: number; output: string }> {
  const id = (await podman.podman(['run', '--detach', ...args])).stdout.trim();
  const code = Number((await podman.podman(['wait', id], 5 * 60_000)).stdout.trim());
  const { stdout, stderr } = await podman.podman(['logs', id]);
  await podman.podman(['rm', '--force', id]);
  return { code, output: stdout + stderr };
}

/** What the pod's project volume holds (`ls -A` of it, in a throwaway container). */
async function volumeEntries(volume: string): Promise<string[]> {
  const { stdout } = await podman.podman([
    'run',
    '--rm',
    '--network',
    'none',
    '--volume',
    `${volume}:/v:ro`,
    '--entrypoint',
    'ls',
    agentServerImage,
    '-A',
    '/v',
  ]);
  return stdout.split('\n').filter(Boolean);
}

describe('a source revision on the agent-server image, as the kubernetes manifests run it', () => {
  it(
    'the init container fetches and unpacks the build, and the agent server answers a run on graph echo',
    async () => {
      const port = await freePort();
      const pod = await podOf(spec, `berth-test-${revisionId.slice(0, 8)}`, { 8000: port });

      const init = await runToEnd(pod.init);
      expect(init).toMatchObject({ code: 0, output: expect.stringContaining('artifact ready') });
      expect(await volumeEntries(pod.projectVolume)).toEqual(expect.arrayContaining(['langgraph.json', 'node_modules', 'package.json', 'src']));

      const { stdout } = await podman.podman(['run', '--detach', ...pod.main]);
      const id = stdout.trim();
      const base = `http://127.0.0.1:${port}`;
      await until(
        `${base}/ok`,
        async () => {
          const state = (await podman.podman(['inspect', '--format', '{{.State.Running}}', id])).stdout.trim();
          if (state !== 'true') {
            const { stdout: out, stderr } = await podman.podman(['logs', id]);
            throw new Error(`the agent server exited:\n${out}${stderr}`);
          }
          const response = await fetch(`${base}/ok`).catch(() => undefined);
          return response?.status === 200 ? true : undefined;
        },
        180_000,
        500,
      );

      // As the gateway calls it: with the revision's deployment credential.
      const client = new Client({ apiUrl: base, defaultHeaders: { [DEPLOYMENT_CREDENTIAL_HEADER]: spec.env.BERTH_DEPLOYMENT_CREDENTIAL! } });
      const thread = await client.threads.create();
      const result = (await client.runs.wait(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: 'hello from a pod' }] } })) as {
        messages: { content: string }[];
      };
      expect(result.messages.at(-1)?.content).toBe('echo: hello from a pod');
      // Without the credential the agent server refuses (only the gateway may call it).
      expect((await fetch(`${base}/assistants/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(401);

      // The project is the pod's read-only volume; the agent server runs as 10001.
      expect((await podman.podman(['exec', id, 'id', '-u'])).stdout.trim()).toBe('10001');
      await expect(podman.podman(['exec', id, 'touch', '/srv/project/written'])).rejects.toThrow(/Read-only file system/);
      await podman.podman(['rm', '--force', '--time', '0', id]);
    },
    10 * 60_000,
  );

  it.each([
    [
      'a wrong artifact credential',
      (s: SourceRevisionSpec) => ({ ...s.artifact.archive, credential: artifactCredential(secretBox, randomUUID()) }),
      /answered 401: .*artifact credential is required/,
    ],
    ['a wrong SHA-256', (s: SourceRevisionSpec) => ({ ...s.artifact.archive, sha256: 'f'.repeat(64) }), /refusing to unpack it/],
  ])(
    'with %s the init container exits non-zero saying why, and the volume stays empty',
    async (_case, archive, message) => {
      const broken: SourceRevisionSpec = { ...spec, artifact: { ...spec.artifact, archive: archive(spec) } };
      const pod = await podOf(broken, `berth-test-bad-${randomUUID().slice(0, 8)}`);
      const init = await runToEnd(pod.init);
      expect(init.code).not.toBe(0);
      expect(init.output).toMatch(message);
      expect(await volumeEntries(pod.projectVolume)).toEqual([]);
    },
    5 * 60_000,
  );
});
