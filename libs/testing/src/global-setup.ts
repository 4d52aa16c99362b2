/**
 * Jest global setup of each test tier but unit (jest.config.mjs): starts what the tier needs
 * (tiers.ts) and was not started yet for another tier of the same run — one Postgres cluster, one
 * redis-server, one S3 server, the sandbox engine (a private Podman serving the Docker API, two image
 * registries, the busybox test images). Jest runs a project's global setup only when one of its
 * files is selected, so servers start only for the tiers that run. Test files isolate themselves (a
 * database per file, unique queue names, a bucket per file, sandbox instances of their own) instead
 * of restarting servers. Connection details reach the test workers through environment variables
 * read by `env.ts`.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
// Jest loads global setup outside its module mapping, so this resolves to the built package.
import { DockerRegistry, PodmanService, PostgresServer, RedisServer, S3Server, findRedisServer, podmanUnavailableReason, run } from '@berth/local-stack';
import { chromiumUnavailableReason } from './chromium.js';
import { TEST_ENV } from './env.js';
import globalTeardown from './global-teardown.js';
import { buildSandboxImages, pushImage, type TestSandbox } from './sandbox-image.js';
import { tierServers, type TestServer } from './tiers.js';

export interface TestServers {
  postgres: PostgresServer;
  redis: RedisServer;
  s3: S3Server;
  podman: PodmanService;
  registries: DockerRegistry[];
}

/** What the global setups of this run started, in the one process jest runs them (and the teardown) in. */
export interface TestRun {
  /** The run's temporary folder (the servers' data, the tests' own files). */
  dir: string;
  servers: Partial<TestServers>;
  /** Started by the setup of an earlier tier of this run. */
  started: Set<TestServer>;
}

declare global {
  var __berthTestRun: TestRun | undefined;
}

/** The part of jest's project config the setup reads: the project is the tier. */
interface TierProject {
  displayName?: { name: string };
}

export default async function globalSetup(_global: unknown, project: TierProject): Promise<void> {
  const tier = project.displayName?.name ?? '';
  const wanted = tierServers(tier).filter((server) => !globalThis.__berthTestRun?.started.has(server));
  // Jest runs no teardown after a failed setup: leave no servers (of this tier or an earlier one),
  // containers or mounts behind.
  await startServers(tier, wanted).catch(async (error: unknown) => {
    await globalTeardown();
    throw error;
  });
}

async function startServers(tier: string, wanted: TestServer[]): Promise<void> {
  checkTools(wanted);
  if (!globalThis.__berthTestRun) {
    const dir = await mkdtemp(join(tmpdir(), 'berth-test-'));
    // As root, Postgres runs as another user, which must be able to enter this folder.
    await chmod(dir, 0o755);
    process.env[TEST_ENV.tmpDir] = dir;
    globalThis.__berthTestRun = { dir, servers: {}, started: new Set() };
  }
  const { dir, servers, started } = globalThis.__berthTestRun;
  const begun = performance.now();
  const starts: Record<TestServer, () => Promise<void>> = {
    postgres: async () => {
      servers.postgres = new PostgresServer({ baseDir: join(dir, 'postgres'), port: 0, mode: 'fast', maxConnections: 400 });
      await servers.postgres.start();
      process.env[TEST_ENV.postgresUrl] = servers.postgres.urlFor('postgres');
    },
    redis: async () => {
      servers.redis = new RedisServer();
      process.env[TEST_ENV.redisUrl] = (await servers.redis.start()).url;
    },
    s3: async () => {
      servers.s3 = new S3Server({ directory: join(dir, 's3') });
      process.env[TEST_ENV.s3Endpoint] = (await servers.s3.start()).endpoint;
    },
    sandbox: async () => {
      process.env[TEST_ENV.sandbox] = JSON.stringify(await startSandboxEngine(join(dir, 'sandbox'), servers));
    },
    // Launched by each browser test (launchChromium); checkTools made sure it is installed.
    chromium: async () => {},
  };
  await Promise.all(wanted.map((server) => starts[server]()));
  for (const server of wanted) started.add(server);
  if (wanted.length) console.log(`test tier ${tier}: ${wanted.join(', ')} ready in ${((performance.now() - begun) / 1000).toFixed(1)} s`);
}

/** Stops the run before the tier starts anything when one of its tools is missing, saying how to get it. */
function checkTools(servers: TestServer[]): void {
  if (servers.includes('redis') && !findRedisServer()) {
    throw new Error('redis-server is not installed; run `make test` (it installs it) or `apt-get install redis-server`');
  }
  const podmanProblem = servers.includes('sandbox') && podmanUnavailableReason();
  if (podmanProblem) {
    throw new Error(`sandbox tests need a private Podman engine, but ${podmanProblem}; \`make test\` installs it as root`);
  }
  const chromiumProblem = servers.includes('chromium') && chromiumUnavailableReason();
  if (chromiumProblem) throw new Error(`browser tests need Chromium: ${chromiumProblem}`);
}

async function startSandboxEngine(dir: string, servers: Partial<TestServers>): Promise<TestSandbox> {
  const registry = new DockerRegistry({ directory: join(dir, 'registry') });
  const user = { username: 'berth', password: randomBytes(12).toString('hex') };
  const privateRegistry = new DockerRegistry({ directory: join(dir, 'private-registry'), users: { [user.username]: user.password } });
  servers.registries = [registry, privateRegistry];
  // Storage quotas need btrfs (XFS project quotas are often not in the kernel): the tier tests them,
  // so an engine without them stops it, saying what is missing, rather than skipping those tests.
  await run('mkfs.btrfs', ['--version']).catch((error: unknown) => {
    throw new Error('the sandbox tier needs mkfs.btrfs for storage quotas: install btrfs-progs (scripts/ensure-podman.sh does)', { cause: error });
  });
  const podman = new PodmanService({ directory: join(dir, 'podman'), storage: 'btrfs-loop' });
  servers.podman = podman;
  const [, , engine] = await Promise.all([
    registry.start(),
    privateRegistry.start(),
    podman.start().catch((error: unknown) => {
      throw new Error('the sandbox tier needs a btrfs engine for storage quotas (a loop device and btrfs); it did not start', { cause: error });
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
