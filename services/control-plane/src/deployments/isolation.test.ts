/**
 * A deployed graph is other people's code. Deployed on the local deployer as root (as `berth up`
 * runs on a server), a graph that goes looking for the platform's and another tenant's data finds
 * nothing: not the superuser, not the platform's database or files, not another deployment's
 * database, build, home or agent server. Every probe below is what a hostile graph tried.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { silentLogger } from '@berth/log';
import { createTestDatabase, testEnv, type TestDatabase } from '@berth/testing';
import { echoProject as project } from '../build/__tests__/tarballs.js';
import { testControlPlaneConfig } from '../__tests__/test-config.js';
import { detectLocalIsolation, start, type RunningControlPlane } from '../index.js';
import type { Deployments } from './service.js';


/** The graph of the attacker: every probe's outcome, as JSON in its reply. */
const hostileGraph = `
import { createRequire } from 'node:module';
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
  await attempt('uid', () => process.getuid!());
  await attempt('own database', () => query(own.toString(), 'SELECT current_user'));
  await attempt('platform tables', () => query(own.toString(), 'SELECT * FROM control_plane.deployments'));
  await attempt('platform database', () => query(other({ db: target.platformDb }), 'SELECT 1'));
  await attempt('victim database', () => query(other({ db: target.victimDb }), 'SELECT 1'));
  await attempt('superuser', () => query(other({ user: target.superuser, db: target.platformDb }), 'SELECT 1'));
  // The deployment's own credential and webhook signing secret are its owner's, not the platform's.
  const ownSecrets = new Set(['BERTH_DEPLOYMENT_CREDENTIAL', 'BERTH_WEBHOOK_SECRET']);
  await attempt('env', () => Object.keys(process.env).filter((k) => /SECRET|TOKEN|KEY|PASSWORD/.test(k) && !ownSecrets.has(k)).join(','));
  await attempt('secret key', () => readFileSync(target.secretKey, 'utf8'));
  await attempt('platform logs', () => readdirSync(target.logs));
  await attempt('state folder', () => readdirSync(target.stateDir));
  await attempt('victim build', () => readdirSync(target.victimBuild));
  await attempt('own build writable', () => writeFileSync(process.cwd() + '/langgraph.json', '{}'));
  await attempt('platform process', () => readFileSync('/proc/' + process.ppid + '/environ', 'utf8').length);
  await attempt('victim agent server', async () => {
    const res = await fetch(target.victimUrl + '/threads/search', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    if (res.status !== 200) throw Object.assign(new Error(), { code: String(res.status) });
    return res.status;
  });
  return { messages: [new AIMessage(JSON.stringify(out))] };
}

export const graph = new StateGraph(State).addNode('probe', probe).addEdge('__start__', 'probe').addEdge('probe', '__end__').compile();
`;


const tenant = randomUUID();
let db: TestDatabase;
let stateDir: string;
let plane: RunningControlPlane;
let deployments: Deployments;

beforeAll(async () => {
  db = await createTestDatabase('cp_isolation');
  // A state folder as `berth up` keeps it: others pass through, the secret key and logs are root's.
  stateDir = await mkdtemp(join(testEnv('tmpDir'), 'isolation-'));
  await chmod(stateDir, 0o711);
  await writeFile(join(stateDir, 'secret-key'), 'the platform secret key', { mode: 0o600 });
  await mkdir(join(stateDir, 'logs'), { mode: 0o700 });
  plane = await start(testControlPlaneConfig(db.url, join(stateDir, 'artifacts')), silentLogger());
  deployments = plane.deployments!;
}, 60_000);

afterAll(async () => {
  await plane?.close();
  await db?.drop();
  await rm(stateDir, { recursive: true, force: true });
});

async function deploy(name: string, tarball: Buffer): Promise<{ id: string; url: string; credential: string }> {
  const created = await deployments.create({ tenantId: tenant, name, source: 'internal_source', sourceRevisionConfig: {}, secrets: [] });
  await deployments.upload({ tenantId: tenant, deploymentId: created.id, data: tarball, last: true });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const { status, status_message } = await deployments.revision(tenant, created.id, created.latest_revision_id!);
    if (status === 'DEPLOYED') break;
    if (status.endsWith('FAILED') || Date.now() > deadline) throw new Error(`${name}: ${status} ${status_message}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const target = await deployments.resolve(created.id);
  return { id: created.id, url: target.upstream_url!, credential: target.credential };
}

describe('a deployed graph on the local deployer', () => {
  it('reaches nothing of the platform or of another deployment', async () => {
    // As root, with Berth readable by other users (scripts/run-tests.mjs sees to the checkout).
    expect(await detectLocalIsolation(stateDir)).toEqual({ kind: 'os-user' });
    const victim = await deploy('victim', project());
    const attacker = await deploy('attacker', project(hostileGraph));
    const target = {
      platformDb: new URL(db.url).pathname.slice(1),
      victimDb: `berth_agent_${victim.id.replace(/-/g, '')}`,
      superuser: new URL(db.url).username,
      secretKey: join(stateDir, 'secret-key'),
      logs: join(stateDir, 'logs'),
      stateDir,
      victimBuild: join(stateDir, 'artifacts', victim.id),
      victimUrl: victim.url,
    };
    const res = await fetch(`${attacker.url}/runs/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-berth-deployment-credential': attacker.credential },
      body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: JSON.stringify(target) }] } }),
    });
    expect(res.status).toBe(200);
    const outcome = JSON.parse(((await res.json()) as { messages: { content: string }[] }).messages.at(-1)!.content) as Record<string, string>;
    expect(outcome).toEqual({
      uid: expect.stringMatching(/^ok \d+$/),
      'own database': `ok [{"current_user":"berth_agent_${attacker.id.replace(/-/g, '')}"}]`,
      'platform tables': 'denied 42P01',
      'platform database': 'denied 42501',
      'victim database': 'denied 42501',
      superuser: 'denied 28P01',
      env: 'ok ',
      'secret key': 'denied EACCES',
      'platform logs': 'denied EACCES',
      'state folder': 'denied EACCES',
      'victim build': 'denied EACCES',
      'own build writable': 'denied EACCES',
      'platform process': 'denied EACCES',
      'victim agent server': 'denied 401',
    });
    expect(outcome.uid).not.toBe('ok 0');
  }, 300_000);
});
