/**
 * Jest global setup: starts one Postgres cluster, one redis-server, one S3 server and the sandbox
 * engine (a private Podman serving the Docker API, two image registries, the busybox test images)
 * for the whole run. Test files isolate themselves (a database per file, unique queue names, a
 * bucket per file, sandbox instances of their own) instead of restarting servers. Connection
 * details reach the test workers through environment variables read by `env.ts`.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// Jest loads global setup outside its module mapping, so this resolves to the built package.
import {
  DockerRegistry,
  PodmanService,
  PostgresServer,
  RedisServer,
  S3Server,
  findRedisServer,
  podmanUnavailableReason,
  run,
} from '@berth/local-stack';
import { TEST_ENV } from './env.js';
import globalTeardown from './global-teardown.js';
import { buildSandboxImages, pushImage, type TestSandbox } from './sandbox-image.js';

export interface TestServers {
  postgres: PostgresServer;
  redis: RedisServer;
  s3: S3Server;
  podman: PodmanService;
  registries: DockerRegistry[];
}

declare global {
  // Shared with global-teardown, which jest runs in the same process.
  var __berthTestServers: Partial<TestServers> | undefined;
}

export default async function globalSetup(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
  // As root, Postgres runs as another user, which must be able to enter this folder.
  await chmod(dir, 0o755);
  process.env[TEST_ENV.tmpDir] = dir;
  if (!findRedisServer()) {
    throw new Error('redis-server is not installed; run `make test` (it installs it) or `apt-get install redis-server`');
  }
  const podmanProblem = podmanUnavailableReason();
  if (podmanProblem) {
    throw new Error(`sandbox tests need a private Podman engine, but ${podmanProblem}; \`make test\` installs it as root`);
  }
  const servers: Partial<TestServers> = {};
  globalThis.__berthTestServers = servers;
  servers.postgres = new PostgresServer({ baseDir: join(dir, 'postgres'), port: 0, mode: 'fast', maxConnections: 400 });
  servers.redis = new RedisServer();
  servers.s3 = new S3Server({ directory: join(dir, 's3') });
  const [, rd, s3info, sandbox] = await Promise.all([
    servers.postgres.start(),
    servers.redis.start(),
    servers.s3.start(),
    startSandboxEngine(join(dir, 'sandbox'), servers),
  ]).catch(async (error: unknown) => {
    // Jest runs no teardown after a failed setup: leave no servers, containers or mounts behind.
    await globalTeardown();
    throw error;
  });
  process.env[TEST_ENV.postgresUrl] = servers.postgres.urlFor('postgres');
  process.env[TEST_ENV.redisUrl] = rd.url;
  process.env[TEST_ENV.s3Endpoint] = s3info.endpoint;
  process.env[TEST_ENV.sandbox] = JSON.stringify(sandbox);
}

async function startSandboxEngine(dir: string, servers: Partial<TestServers>): Promise<TestSandbox> {
  const registry = new DockerRegistry({ directory: join(dir, 'registry') });
  const user = { username: 'berth', password: randomBytes(12).toString('hex') };
  const privateRegistry = new DockerRegistry({ directory: join(dir, 'private-registry'), users: { [user.username]: user.password } });
  servers.registries = [registry, privateRegistry];
  // Storage quotas need btrfs (XFS project quotas are often not in the kernel); without loop
  // devices or btrfs-progs the engine still runs, and quota tests are skipped.
  const btrfs = await run('mkfs.btrfs', ['--version']).then(() => true, () => false);
  let podman = new PodmanService({ directory: join(dir, 'podman'), storage: btrfs ? 'btrfs-loop' : 'overlay' });
  servers.podman = podman;
  const [, , engine] = await Promise.all([
    registry.start(),
    privateRegistry.start(),
    podman.start().catch(async (error: unknown) => {
      if (podman.storage !== 'btrfs-loop') throw error;
      console.warn(`sandbox engine: btrfs storage failed (${String(error)}); using overlay without storage quotas`);
      await podman.stop();
      podman = new PodmanService({ directory: join(dir, 'podman-overlay') });
      servers.podman = podman;
      return podman.start();
    }),
  ]);
  const local = await buildSandboxImages(podman, join(dir, 'images'));
  const [image, userImage, privateImage] = await Promise.all([
    pushImage(podman, local.root, registry.host, 'berth-test/busybox:1'),
    pushImage(podman, local.user, registry.host, 'berth-test/busybox-user:1'),
    pushImage(podman, local.root, privateRegistry.host, 'berth-test/busybox:1', user),
  ]);
  // Tests pull from the registries, like any template image: no local copies left behind.
  await podman.podman(['rmi', '--force', local.user, local.root]);
  await mkdir(join(dir, 'work'), { recursive: true });
  return {
    socketPath: engine.socketPath,
    registry: registry.host,
    image,
    userImage,
    privateRegistry: { host: privateRegistry.host, image: privateImage, ...user },
    storageQuota: podman.enforcesStorageQuota,
    tmpDir: join(dir, 'work'),
    podman: podman.command,
  };
}
