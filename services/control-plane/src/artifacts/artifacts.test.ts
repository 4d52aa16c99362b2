// Built revisions in object storage (a real s3rver), served to a revision's pods through the
// artifact endpoint and fetched by the init container's fetcher, which checks the recorded SHA-256.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { link, mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { ArtifactChecksumError, fetchArtifact } from '@berth/agent-runtime';
import { createLogger } from '@berth/log';
import { SecretBox } from '@berth/secret-box';
import { createTestBucket, testS3 } from '@berth/testing';
import { loadControlPlaneConfig } from '../env.js';
import { ArtifactStore, type StoredArtifact } from './artifact-store.js';
import { artifactCredential, artifactPath, startArtifactServer, type RunningArtifactServer } from './artifact-server.js';

describe('revision artifacts in object storage', () => {
  const s3 = testS3();
  const client = s3.client();
  const secretBox = new SecretBox(SecretBox.generateKey());
  const recorded = new Map<string, StoredArtifact>();
  let bucket: string;
  let store: ArtifactStore;
  let server: RunningArtifactServer;
  let root: string;
  const deploymentId = randomUUID();
  const revisionId = randomUUID();

  beforeAll(async () => {
    bucket = await createTestBucket('artifacts');
    store = new ArtifactStore({
      bucket,
      endpoint: s3.endpoint,
      region: s3.region,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    });
    server = await startArtifactServer({
      lookup: async (id) => recorded.get(id),
      artifacts: store,
      secretBox,
      host: '127.0.0.1',
      port: 0,
      log: createLogger({ name: 'test', level: 'silent' }),
    });
    root = await mkdtemp(join(tmpdir(), 'berth-artifacts-'));
  });
  afterAll(async () => {
    await server.close();
    store.close();
    client.destroy();
    await rm(root, { recursive: true, force: true });
  });

  async function builtProject(): Promise<string> {
    // As the project builder leaves it: installed dependencies (hard-linked from its cache), bin links.
    const dir = join(root, 'built');
    await mkdir(join(dir, 'node_modules', 'dep', 'bin'), { recursive: true });
    await mkdir(join(dir, 'node_modules', '.bin'), { recursive: true });
    await writeFile(join(dir, 'langgraph.json'), '{"graphs":{"agent":"./graph.js:graph"}}');
    await writeFile(join(dir, 'node_modules', 'dep', 'bin', 'cli.js'), '#!/usr/bin/env node\n', { mode: 0o755 });
    await link(join(dir, 'node_modules', 'dep', 'bin', 'cli.js'), join(dir, 'node_modules', 'dep', 'copy.js'));
    await symlink('../dep/bin/cli.js', join(dir, 'node_modules', '.bin', 'dep'));
    return dir;
  }

  it('stores a build with its SHA-256, and the fetcher unpacks exactly it through the endpoint', async () => {
    const stored = await store.put(deploymentId, revisionId, await builtProject());
    expect(stored.key).toBe(`revisions/${deploymentId}/${revisionId}.tar.gz`);
    expect(stored.sha256).toMatch(/^[0-9a-f]{64}$/);
    const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: stored.key }));
    expect(head.ContentLength).toBe(stored.size);
    recorded.set(revisionId, stored);

    const dir = join(root, 'served');
    await fetchArtifact({ url: server.url + artifactPath(revisionId), credential: artifactCredential(secretBox, revisionId), sha256: stored.sha256, dir });
    expect(await readFile(join(dir, 'langgraph.json'), 'utf8')).toBe('{"graphs":{"agent":"./graph.js:graph"}}');
    expect((await stat(join(dir, 'node_modules', 'dep', 'bin', 'cli.js'))).mode & 0o111).toBeTruthy();
    expect(await readFile(join(dir, 'node_modules', 'dep', 'copy.js'), 'utf8')).toBe('#!/usr/bin/env node\n');
    expect(await readlink(join(dir, 'node_modules', '.bin', 'dep'))).toBe('../dep/bin/cli.js');
  });

  it("answers only with the revision's own credential", async () => {
    const other = randomUUID();
    const url = server.url + artifactPath(revisionId);
    const wrong = await fetch(url, { headers: { authorization: `Bearer ${artifactCredential(secretBox, other)}` } });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toEqual({ detail: `revision ${revisionId}'s artifact credential is required (Authorization: Bearer …)` });
    expect((await fetch(url)).status).toBe(401);
    // The deployment credential the gateway sends its agent servers is not an artifact credential.
    expect((await fetch(url, { headers: { authorization: `Bearer ${secretBox.deploymentCredential(revisionId)}` } })).status).toBe(401);
    const none = await fetch(server.url + artifactPath(other), { headers: { authorization: `Bearer ${artifactCredential(secretBox, other)}` } });
    expect(none.status).toBe(404);
    expect((await fetch(`${server.url}/healthz`)).status).toBe(404);
  });

  it('a tampered archive in the bucket is refused by the fetcher with a clear error, and nothing is unpacked', async () => {
    const stored = recorded.get(revisionId)!;
    const original = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: stored.key }))).Body!.transformToByteArray());
    const tampered = Buffer.from(original);
    tampered[Math.floor(tampered.length / 2)]! ^= 0x01;
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: stored.key, Body: tampered }));
    const dir = join(root, 'tampered');
    const error = await fetchArtifact({
      url: server.url + artifactPath(revisionId),
      credential: artifactCredential(secretBox, revisionId),
      sha256: stored.sha256,
      dir,
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ArtifactChecksumError);
    expect((error as Error).message).toContain(`but the revision was built as ${stored.sha256}: refusing to unpack it`);
    await expect(stat(dir)).rejects.toThrow(/ENOENT/);
  });

  it("deletes a deployment's archives; a redeploy then knows the archive is gone (has)", async () => {
    const key = recorded.get(revisionId)!.key;
    expect(await store.has(key)).toBe(true);
    expect(await store.removeDeployment(deploymentId)).toBe(1);
    expect(await store.removeDeployment(deploymentId)).toBe(0);
    expect(await store.has(key)).toBe(false);
  });
});

describe('artifact settings', () => {
  // As the chart sets them (the agent pods' NetworkPolicy names the platform's pods).
  const env = {
    DATABASE_URL: 'postgres://x@127.0.0.1/x',
    BERTH_SECRET_KEY: 'k',
    BERTH_DEPLOYER: 'kubernetes',
    BERTH_S3_BUCKET: 'builds',
    BERTH_GATEWAY_POD_LABELS: 'app.kubernetes.io/component=gateway',
    BERTH_CONTROL_PLANE_POD_LABELS: 'app.kubernetes.io/component=control-plane',
  };

  it('needs BERTH_ARTIFACTS_URL with a bucket on kubernetes: pods cannot reach the control plane at its loopback address', () => {
    expect(() => loadControlPlaneConfig(env)).toThrow(/BERTH_ARTIFACTS_URL: required with BERTH_DEPLOYER=kubernetes and BERTH_S3_BUCKET/);
    const config = loadControlPlaneConfig({ ...env, BERTH_ARTIFACTS_URL: 'http://berth-control-plane.berth.svc:8092' });
    expect(config.deployments?.archives).toMatchObject({ port: 8092, url: 'http://berth-control-plane.berth.svc:8092', storage: { bucket: 'builds' } });
    expect(loadControlPlaneConfig({ ...env, BERTH_DEPLOYER: 'local' }).deployments?.archives).toBeUndefined();
  });
});
