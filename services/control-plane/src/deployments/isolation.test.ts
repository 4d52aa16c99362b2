/**
 * A deployed graph is other people's code. Deployed on the local deployer as root with a container
 * engine (as `berth up` runs on a server: in a container of its own), a graph that goes looking for
 * the platform's and another tenant's data finds nothing: not the superuser, not the platform's
 * database, processes or files, not another deployment's database, build, home, /tmp or agent
 * server; and it reaches no loopback, private or metadata address, only what the operator allows.
 * Every probe below is what a hostile graph tried.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '@berth/log';
import { createTestDatabase, testEnv, type TestDatabase } from '@berth/testing';
import { echoProject as project } from '../build/__tests__/tarballs.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { until } from '../__tests__/until.js';
import { start, type RunningControlPlane } from '../index.js';
import type { Deployments } from './service.js';

/** The graph of the attacker: every probe's outcome, as JSON in its reply. */
const hostileGraph = `
import { createRequire } from 'node:module';
import { lookup } from 'node:dns/promises';
import { connect } from 'node:net';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { AIMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';

const State = new StateSchema({ messages: MessagesValue });

async function probe(state: typeof State.State) {
  const target = JSON.parse(state.messages.at(-1)!.text);
  // Whatever the platform's installation offers: its own Postgres driver.
  const pg = createRequire(process.argv[1]!)('pg');
  const out: Record<string, string> = {};
  const attempt = async (name: string, fn: () => unknown) => {
    try { out[name] = 'ok ' + String(await fn()); } catch (e: any) { out[name] = 'denied ' + (e.code ?? e.message); }
  };
  const query = async (url: string, sql: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try { return JSON.stringify((await client.query(sql)).rows); } finally { await client.end(); }
  };
  const own = new URL(process.env.DATABASE_URL!);
  const other = (changes: { user?: string; db?: string }) => {
    const url = new URL(own);
    if (changes.user) url.username = changes.user;
    if (changes.db) url.pathname = '/' + changes.db;
    return url.toString();
  };
  const tcp = (host: string, port: number) => new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: 3000 }, () => { socket.destroy(); resolve('connected'); });
    socket.once('error', reject).once('timeout', () => { socket.destroy(); reject(new Error('timeout')); });
  });
  const get = async (url: string) => {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
      return res.status + ' ' + (await res.text()).slice(0, 40);
    } catch (e: any) {
      // fetch's own error says nothing: why is in its causes.
      const why: string[] = [];
      for (let cause = e; cause; cause = cause.cause) why.push(cause.message);
      throw new Error(why.join(': '));
    }
  };
  writeFileSync('/tmp/' + target.name, 'left by ' + target.name);
  if (target.name === 'victim') return { messages: [new AIMessage('{}')] };
  await attempt('uid', () => process.getuid!());
  await attempt('own database', () => query(own.toString(), 'SELECT current_user'));
  await attempt('platform tables', () => query(own.toString(), 'SELECT * FROM control_plane.deployments'));
  await attempt('platform database', () => query(other({ db: target.platformDb }), 'SELECT 1'));
  await attempt('postgres database', () => query(other({ db: 'postgres' }), 'SELECT 1'));
  await attempt('template1 database', () => query(other({ db: 'template1' }), 'SELECT 1'));
  await attempt('victim database', () => query(other({ db: target.victimDb }), 'SELECT 1'));
  await attempt('superuser', () => query(other({ user: target.superuser, db: target.platformDb }), 'SELECT 1'));
  // The deployment's own credential and webhook signing secret are its owner's, not the platform's.
  const ownSecrets = new Set(['BERTH_DEPLOYMENT_CREDENTIAL', 'BERTH_WEBHOOK_SECRET']);
  await attempt('env', () => Object.keys(process.env).filter((k) => /SECRET|TOKEN|KEY|PASSWORD/.test(k) && !ownSecrets.has(k)).join(','));
  await attempt('secret key', () => readFileSync(target.secretKey, 'utf8'));
  await attempt('state folder', () => readdirSync(target.stateDir));
  await attempt('victim build', () => readdirSync(target.victimBuild));
  await attempt('own build writable', () => writeFileSync(process.cwd() + '/langgraph.json', '{}'));
  await attempt('host processes', () => readdirSync('/proc').filter((p) => /^\\d+$/.test(p)).map((p) => { try { return readFileSync('/proc/' + p + '/cmdline', 'utf8'); } catch { return ''; } }).filter((cmd) => /postgres|podman|jest|conmon/.test(cmd)).length);
  await attempt('platform process', () => readFileSync('/proc/' + target.platformPid + '/environ', 'utf8').length);
  await attempt('tmp', () => readdirSync('/tmp').join(','));
  await attempt('victim agent server', () => get(target.victimUrl + '/ok'));
  await attempt('postgres port', () => tcp('127.0.0.1', target.postgresPort));
  await attempt('postgres port by fetch', () => get('http://127.0.0.1:' + target.postgresPort + '/'));
  await attempt('grpc port by fetch', () => get('http://127.0.0.1:' + target.grpcPort + '/'));
  await attempt('metadata', () => tcp('169.254.169.254', 80));
  await attempt('metadata by fetch', () => get('http://169.254.169.254/latest/meta-data/'));
  await attempt('private address by fetch', () => get('http://10.0.0.1/'));
  await attempt('other loopback by fetch', () => get('http://127.0.0.3:' + target.postgresPort + '/'));
  await attempt('dns', () => lookup('example.com').then((a) => a.address));
  await attempt('allowed receiver', () => get(target.allowedUrl));
  return { messages: [new AIMessage(JSON.stringify(out))] };
}

export const graph = new StateGraph(State).addNode('probe', probe).addEdge('__start__', 'probe').addEdge('probe', '__end__').compile();
`;

const tenant = randomUUID();
let db: TestDatabase;
let stateDir: string;
let plane: RunningControlPlane;
let deployments: Deployments;
/** A receiver on a loopback address the operator allowed for this test (127.0.0.2/32): the proxy path works. */
let receiver: Server;
/** A webhook receiver on one allowed for webhooks (127.0.0.4/32), and what it was sent. */
let hooks: Server;
const delivered: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('cp_isolation');
  // A state folder as `berth up` keeps it: others pass through, the secret key and logs are root's.
  stateDir = await mkdtemp(join(testEnv('tmpDir'), 'isolation-'));
  await chmod(stateDir, 0o711);
  await writeFile(join(stateDir, 'secret-key'), 'the platform secret key', { mode: 0o600 });
  await mkdir(join(stateDir, 'logs'), { mode: 0o700 });
  receiver = createServer((_req, res) => res.end('allowed receiver'));
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.2', resolve));
  hooks = createServer((req, res) => {
    let body = '';
    req
      .on('data', (chunk: Buffer) => (body += chunk.toString()))
      .on('end', () => {
        delivered.push(body);
        res.end();
      });
  });
  await new Promise<void>((resolve) => hooks.listen(0, '127.0.0.4', resolve));
  plane = await start(
    testControlPlaneConfig(db.url, join(stateDir, 'artifacts'), { deploymentPrivateEgress: ['127.0.0.2/32'], webhookPrivateEgress: ['127.0.0.4/32'] }),
    silentLogger(),
  );
  deployments = plane.deployments!;
}, 60_000);

afterAll(async () => {
  await plane?.close();
  receiver?.close();
  hooks?.close();
  await db?.drop();
  await rm(stateDir, { recursive: true, force: true });
});

async function deploy(name: string, tarball: Buffer): Promise<{ id: string; url: string; credential: string }> {
  const created = await deployments.create({ tenantId: tenant, name, source: 'internal_source', sourceRevisionConfig: {}, secrets: [] });
  await deployments.upload({ tenantId: tenant, deploymentId: created.id, data: tarball, last: true });
  const { status, status_message } = await until(
    `${name} to finish deploying`,
    async () => {
      const revision = await deployments.revision(tenant, created.id, created.latest_revision_id!);
      return (revision.status === 'DEPLOYED' || revision.status.endsWith('FAILED')) && revision;
    },
    120_000,
    200,
  );
  if (status !== 'DEPLOYED') throw new Error(`${name}: ${status} ${status_message}`);
  const target = await deployments.resolve(created.id);
  return { id: created.id, url: target.upstream_url!, credential: target.credential };
}

/** Runs the deployment's graph with `input` (JSON) as the message; its reply, parsed. */
async function run(deployment: { url: string; credential: string }, input: Record<string, unknown>, webhook?: string): Promise<Record<string, string>> {
  const res = await fetch(`${deployment.url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-berth-deployment-credential': deployment.credential },
    body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: JSON.stringify(input) }] }, ...(webhook ? { webhook } : {}) }),
  });
  expect(res.status).toBe(200);
  return JSON.parse(((await res.json()) as { messages: { content: string }[] }).messages.at(-1)!.content) as Record<string, string>;
}

describe('a deployed graph on the local deployer', () => {
  it('reaches nothing of the platform or of another deployment', async () => {
    expect(plane.isolation).toEqual({ kind: 'container' });
    const victim = await deploy('victim', project(hostileGraph));
    const attacker = await deploy('attacker', project(hostileGraph));
    // The victim leaves a file in its /tmp.
    await run(victim, { name: 'victim' });
    const target = {
      name: 'attacker',
      platformDb: new URL(db.url).pathname.slice(1),
      victimDb: `berth_agent_${victim.id.replace(/-/g, '')}`,
      superuser: new URL(db.url).username,
      secretKey: join(stateDir, 'secret-key'),
      stateDir,
      victimBuild: join(stateDir, 'artifacts', victim.id),
      platformPid: process.pid,
      victimUrl: victim.url,
      postgresPort: Number(new URL(db.url).port),
      grpcPort: plane.port,
      allowedUrl: `http://127.0.0.2:${(receiver.address() as { port: number }).port}/`,
    };
    // Its run's webhook goes out through the proxy too, to a receiver the operator allowed.
    const outcome = await run(attacker, target, `http://127.0.0.4:${(hooks.address() as { port: number }).port}/hook`);
    const refusedByProxy = expect.stringMatching(/^denied .*\b403\b/);
    expect(outcome).toEqual({
      uid: expect.stringMatching(/^ok \d+$/),
      'own database': `ok [{"current_user":"berth_agent_${attacker.id.replace(/-/g, '')}"}]`,
      'platform tables': 'denied 42P01',
      'platform database': 'denied 42501',
      'postgres database': 'denied 42501',
      'template1 database': 'denied 42501',
      'victim database': 'denied 42501',
      superuser: 'denied 28P01',
      env: 'ok ',
      // The platform's folders are not in its container at all.
      'secret key': 'denied ENOENT',
      'state folder': 'denied ENOENT',
      'victim build': 'denied ENOENT',
      'own build writable': 'denied EROFS',
      // No process of the host is visible: not Postgres, the engine, this test, the control plane.
      'host processes': 'ok 0',
      'platform process': 'denied ENOENT',
      // Its own /tmp: the victim's file is not there.
      tmp: expect.stringMatching(/^ok (?!.*victim).*attacker/),
      // Loopback is its own: nothing of the host's listens there.
      'victim agent server': expect.stringMatching(/^denied .*ECONNREFUSED/),
      'postgres port': 'denied ECONNREFUSED',
      'postgres port by fetch': expect.stringMatching(/^denied .*ECONNREFUSED/),
      'grpc port by fetch': expect.stringMatching(/^denied .*ECONNREFUSED/),
      // Another loopback address, a link-local or private one: fetch asks the egress proxy, which refuses.
      'other loopback by fetch': refusedByProxy,
      metadata: expect.stringMatching(/^denied (ENETUNREACH|EHOSTUNREACH|timeout)$/),
      'metadata by fetch': refusedByProxy,
      'private address by fetch': refusedByProxy,
      dns: expect.stringMatching(/^denied (ENOTFOUND|EAI_AGAIN)$/),
      'allowed receiver': 'ok 200 allowed receiver',
    });
    expect(outcome.uid).not.toBe('ok 0');
    // Nor did either write to the host's /tmp.
    expect(existsSync('/tmp/attacker') || existsSync('/tmp/victim')).toBe(false);
    await until('the webhook', () => (delivered.length ? true : undefined), 20_000);
    expect(JSON.parse(delivered[0]!)).toMatchObject({ status: 'success' });
  }, 300_000);
});
