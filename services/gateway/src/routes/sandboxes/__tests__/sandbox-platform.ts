/**
 * A gateway in front of a sandbox-manager running the real container driver on the test Podman
 * engine (jest global setup), with two tenants, for the sandboxes' end-to-end tests. The manager
 * can be restarted on the same database (what `berth up` does after a crash) while the engine and
 * its sandboxes keep running.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { silentLogger } from '@berth/log';
import { start as startSandboxManager, type RunningSandboxManager, type SandboxSettings } from '@berth/sandbox-manager';
import { createTestDatabase, testSandbox, until, type TestDatabase } from '@berth/testing';
import { SandboxClient } from 'langsmith/sandbox';
import { start, type RunningGateway } from '../../../index.js';
import { testGatewayConfig } from '../../../__tests__/test-config.js';

export type Json = Record<string, any>;

export interface CallInit {
  method?: string;
  json?: unknown;
  key?: string;
}

export interface PlatformOptions {
  /** Test database name prefix. */
  db: string;
  sandboxes?: Omit<SandboxSettings, 'driver' | 'driverInstance'>;
  /** Another engine than the test run's (a private one a test stops and starts). */
  engine?: { socketPath: string; storageQuota: boolean };
}

export const images = testSandbox();

export class SandboxPlatform {
  manager!: RunningSandboxManager;
  gateway!: RunningGateway;
  keyA = '';
  keyB = '';
  #db!: TestDatabase;
  #runDir = '';

  /** The test database (its `berth_sandbox` schema holds the manager's tables). */
  get databaseUrl(): string {
    return this.#db.url;
  }

  private constructor(private readonly options: PlatformOptions) {}

  static async start(options: PlatformOptions): Promise<SandboxPlatform> {
    const platform = new SandboxPlatform(options);
    platform.#db = await createTestDatabase(options.db);
    // Short: the sandboxes' agent and proxy sockets live under it (unix socket paths are ≤ 107 bytes).
    platform.#runDir = await mkdtemp('/tmp/bsx-');
    platform.manager = await platform.startManager();
    const config = testGatewayConfig(platform.#db.url, '127.0.0.1:1');
    // No control plane: this platform is about sandboxes (its /readyz checks only what runs).
    platform.gateway = await start({ ...config, services: { 'sandbox-manager': platform.manager.address } }, silentLogger());
    for (const name of ['a', 'b'] as const) {
      const tenant = await platform.gateway.store.createTenant({ name });
      const { key } = await platform.gateway.store.createApiKey({ tenantId: tenant.id, name, role: 'member' });
      if (name === 'a') platform.keyA = key;
      else platform.keyB = key;
    }
    return platform;
  }

  private async startManager(port = 0): Promise<RunningSandboxManager> {
    return startSandboxManager(
      {
        databaseUrl: this.#db.url,
        secretKey: Buffer.alloc(32, 7).toString('base64'),
        grpcHost: '127.0.0.1',
        grpcPort: port,
        logLevel: 'silent',
        sandboxes: {
          insecureRegistries: [images.registry, images.privateRegistry.host],
          ...this.options.sandboxes,
          driver: {
            kind: 'container',
            socketPath: this.options.engine?.socketPath ?? images.socketPath,
            runDir: this.#runDir,
            storageQuota: (this.options.engine ?? images).storageQuota ? 'enforce' : 'ignore',
          },
        },
      },
      silentLogger(),
    );
  }

  /** Closes the manager (its sandboxes keep running) and starts a new one on the same database and port. */
  async restartManager(): Promise<void> {
    const port = Number(this.manager.address.split(':').pop());
    await this.manager.close();
    this.manager = await this.startManager(port);
  }

  client(key = this.keyA): SandboxClient {
    return new SandboxClient({ apiEndpoint: `${this.gateway.url}/api/v2/sandboxes`, apiKey: key });
  }

  /** A REST call under /api/v2/sandboxes as tenant A (or `key`). */
  async call(path: string, init: CallInit = {}): Promise<{ status: number; body: Json; retryAfter: string | null }> {
    const res = await fetch(`${this.gateway.url}/api/v2/sandboxes${path}`, {
      method: init.method ?? (init.json === undefined ? 'GET' : 'POST'),
      headers: { 'x-api-key': init.key ?? this.keyA, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: init.json !== undefined ? JSON.stringify(init.json) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as Json, retryAfter: res.headers.get('retry-after') };
  }

  /** Creates a template from the test image and waits until it is pulled. */
  async template(name: string, extra: Json = {}): Promise<Json> {
    const created = await this.call('/templates', { json: { name, image: images.image, ...extra } });
    if (created.status !== 201) throw new Error(`creating template ${name}: ${created.status} ${JSON.stringify(created.body)}`);
    return until(
      `template ${name} ready`,
      async () => {
        const { body } = await this.call(`/templates/${name}`);
        if (body.status === 'failed') throw new Error(`template ${name} failed: ${body.status_message}`);
        return body.status === 'ready' ? body : undefined;
      },
      30_000,
    );
  }

  /** Deletes every sandbox and pool of both tenants (tests clean up after themselves). */
  async cleanup(): Promise<void> {
    for (const key of [this.keyA, this.keyB]) {
      const boxes = ((await this.call('/boxes', { key })).body.sandboxes ?? []) as Json[];
      const pools = ((await this.call('/pools', { key })).body.pools ?? []) as Json[];
      for (const path of [...boxes.map((b) => `/boxes/${b.name}`), ...pools.map((p) => `/pools/${p.name}`)]) {
        const { status, body } = await this.call(path, { method: 'DELETE', key });
        if (status !== 204 && status !== 404) throw new Error(`cleaning up ${path}: ${status} ${JSON.stringify(body)}`);
      }
    }
  }

  async close(): Promise<void> {
    try {
      await this.cleanup();
    } finally {
      await this.gateway?.close();
      await this.manager?.close();
      await this.#db?.drop();
      await rm(this.#runDir, { recursive: true, force: true });
    }
  }
}
