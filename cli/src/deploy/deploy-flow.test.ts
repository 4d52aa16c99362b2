/**
 * `berth deploy` and its subcommands (in process) against the real gateway, whose control plane
 * is a fake DeploymentService that the test moves revisions along in: the create and update
 * flows, what the gateway receives, progress output, failures, and the messages for mistakes.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { gunzipSync } from 'node:zlib';
import { start as startGateway, type RunningGateway } from '@berth/gateway';
import { freePort } from '@berth/local-stack';
import { createLogger, silentLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { until } from '@berth/testing';
// The gateway's own test double of the control plane, reused rather than copied.
import { FakeDeploymentService } from '../../../services/gateway/src/__tests__/fake-deployments.js';
import { deploy } from '../commands/deploy.js';
import { deployDelete, deployList, deployLogs, deployRevisions } from '../commands/deploy-manage.js';
import { loadCliEnv, type CliEnv } from '../env.js';
import { testGatewayConfig } from '../../../services/gateway/src/__tests__/test-config.js';

let testDb: TestDatabase;
let fake: FakeDeploymentService;
let gateway: RunningGateway;
let key: string;
let tenantId: string;
let home: string;
let ticker: NodeJS.Timeout;
/** Deployments whose builds fail instead of deploying. */
const FAILING = new Set(['broken']);
/** How many times the CLI had read each revision when it last moved (see advance). */
const readsWhenMoved = new Map<string, number>();
/** Lines as an agent server's logger (pino) writes them to stdout, which the control plane stores as deploy log messages. */
let pino: { listening: string; crashed: string };

function pinoLines(): typeof pino {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString().split('\n').filter(Boolean));
      done();
    },
  });
  const logger = createLogger({ name: 'agent-server', destination });
  logger.info({ url: 'http://127.0.0.1:4100', graphs: ['echo', 'chat'], workers: 10, customAuth: null }, 'agent server listening');
  logger.error({ err: new TypeError('Cannot read properties of undefined'), runId: 'run 1' }, 'graph failed to load');
  return { listening: lines[0]!, crashed: lines[1]! };
}

const NEXT: Record<string, string> = { QUEUED: 'BUILDING', BUILDING: 'AWAITING_DEPLOY', AWAITING_DEPLOY: 'DEPLOYING', DEPLOYING: 'DEPLOYED' };

/**
 * Moves every revision one step along its pipeline, writing log lines like a build would. A
 * revision moves only once the CLI has read its status since it last moved, so the CLI sees every
 * status however slowly the machine runs it.
 */
function advance(): void {
  const reads = fake.callsOf('getRevision');
  for (const revision of fake.revisions.values()) {
    const next = NEXT[revision.status];
    if (!next) continue;
    const read = reads.filter((call) => call.revisionId === revision.id).length;
    if (read <= (readsWhenMoved.get(revision.id) ?? 0)) continue;
    readsWhenMoved.set(revision.id, read);
    if (revision.status === 'BUILDING' && FAILING.has(fake.deployments.get(revision.deploymentId)?.name ?? '')) {
      for (let i = 1; i <= 40; i++) fake.addLog(revision.id, 'build', `compile step ${i}`);
      fake.addLog(revision.id, 'build', 'error TS2304: Cannot find name "grpah"', 'error');
      fake.addLog(revision.id, 'build', pino.crashed);
      revision.status = 'BUILD_FAILED';
      revision.statusMessage = 'the graphs failed to load';
      continue;
    }
    if (next === 'BUILDING') fake.addLog(revision.id, 'build', 'npm ci');
    if (next === 'DEPLOYING') fake.addLog(revision.id, 'deploy', 'starting agent server');
    if (next === 'DEPLOYED') fake.addLog(revision.id, 'deploy', pino.listening);
    if (next === 'DEPLOYED') {
      fake.addLog(revision.id, 'deploy', 'agent server ready');
      const deployment = fake.deployments.get(revision.deploymentId);
      if (deployment) deployment.activeRevisionId = revision.id;
    }
    revision.status = next;
  }
}

beforeAll(async () => {
  pino = pinoLines();
  testDb = await createTestDatabase('cli_deploy');
  fake = await new FakeDeploymentService().start();
  gateway = await startGateway(testGatewayConfig(testDb.url, fake.address), silentLogger());
  tenantId = (await gateway.store.createTenant({ name: 'cli' })).id;
  key = (await gateway.store.createApiKey({ tenantId, name: 'dev' })).key;
  home = await mkdtemp(join(tmpdir(), 'berth-cli-deploy-'));
  ticker = setInterval(advance, 100);
});
afterAll(async () => {
  clearInterval(ticker);
  await gateway.close();
  await fake.close();
  await testDb.drop();
  await rm(home, { recursive: true, force: true });
});

const projects: string[] = [];
afterEach(async () => {
  for (const dir of projects.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** A project folder named `name` with langgraph.json, a source file and the given .env. */
async function project(name: string, dotenv?: string): Promise<string> {
  const dir = join(await mkdtemp(join(home, 'p-')), name);
  projects.push(dir);
  await mkdir(join(dir, 'src'), { recursive: true });
  await writeFile(join(dir, 'langgraph.json'), JSON.stringify({ node_version: '20', graphs: { echo: './src/graph.ts:graph' } }));
  await writeFile(join(dir, 'src', 'graph.ts'), 'export const graph = 1;\n');
  if (dotenv !== undefined) await writeFile(join(dir, '.env'), dotenv);
  return dir;
}

function cliEnv(dir: string, extra: Record<string, string> = {}): CliEnv {
  return loadCliEnv({ HOME: home, XDG_CONFIG_HOME: join(home, 'config'), BERTH_STATE_DIR: join(home, 'state'), ...extra }, dir);
}

function capture(): { print: (line: string) => void; lines: string[]; text: () => string } {
  const lines: string[] = [];
  return { print: (line) => lines.push(line), lines, text: () => lines.join('\n') };
}

const fast = { pollMs: 50 };

describe('berth deploy', () => {
  it('creates a deployment named after the folder, uploads, follows it to DEPLOYED and prints the URL', async () => {
    const dir = await project('My Echo_Agent', `BERTH_API_KEY=${key}\nBERTH_HOST_URL=${gateway.url}\nOPENAI_API_KEY=sk-test\nDATABASE_URL=postgres://x\n`);
    const out = capture();
    const result = await deploy(cliEnv(dir), fast, out.print, dir);
    expect(result.status).toBe('succeeded');
    expect(result.deployment.name).toBe('my-echo-agent');

    const created = fake.callsOf('createDeployment').at(-1)!;
    expect(created).toMatchObject({
      tenantId,
      name: 'my-echo-agent',
      source: 'internal_source',
      sourceConfig: { deployment_type: 'dev' },
      sourceRevisionConfig: { langgraph_config_path: 'langgraph.json' },
    });
    expect(created.secrets).toEqual([expect.objectContaining({ name: 'OPENAI_API_KEY', value: 'sk-test' })]);
    // The upload is the packed project (gzip), attached to the first revision.
    const upload = [...fake.uploads.values()].find((u) => u.deploymentId === result.deployment.id)!;
    expect(upload.complete).toBe(true);
    const tar = gunzipSync(Buffer.concat(upload.sha)).toString('latin1');
    expect(tar).toContain('langgraph.json');
    expect(tar).toContain('src/graph.ts');
    expect(tar).not.toContain('sk-test');
    expect(result.revisionId).toBe(result.deployment.latest_revision_id);
    expect(fake.callsOf('updateDeployment').filter((c) => c.deploymentId === result.deployment.id)).toEqual([]);

    const text = out.text();
    expect(text).toContain('note: not sent as secrets');
    expect(text).toMatch(/not sent as secrets.*BERTH_API_KEY, BERTH_HOST_URL, DATABASE_URL/);
    expect(text).toContain('Secrets from .env: OPENAI_API_KEY');
    expect(text).toMatch(/Packed 2 files/);
    for (const status of ['BUILDING', 'DEPLOYING', 'DEPLOYED']) expect(text).toContain(`Revision ${result.revisionId}: ${status}`);
    expect(text).toMatch(/build {2}INFO {2}npm ci/);
    expect(text).toMatch(/deploy INFO {2}agent server ready/);
    // The agent server's pino line, readable: level, message, fields.
    expect(text).toMatch(/^ {2}\d\d:\d\d:\d\d deploy INFO {2}agent server listening url=http:\/\/127\.0\.0\.1:4100 graphs=echo,chat workers=10$/m);
    expect(out.lines.at(-2)).toBe(`  ${gateway.url}/d/${result.deployment.id}`);
    // Status lines and log lines come in the order they happened.
    expect(text.indexOf('npm ci')).toBeLessThan(text.indexOf(': DEPLOYED'));
  });

  it('updates the deployment of that name: upload, then a new revision with the object path and the secrets', async () => {
    const dir = await project('update-me', 'NEW_SECRET=2\n');
    const env = cliEnv(dir, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url });
    const first = await deploy(env, fast, () => undefined, dir);
    const out = capture();
    const second = await deploy(env, { ...fast, deploymentType: 'prod' }, out.print, dir);
    expect(second.status).toBe('succeeded');
    expect(second.deployment.id).toBe(first.deployment.id);
    expect(second.revisionId).not.toBe(first.revisionId);
    const patch = fake.callsOf('updateDeployment').at(-1)!;
    const objectPath = `uploads/${[...fake.uploads.values()].filter((u) => u.deploymentId === first.deployment.id).at(-1)!.id}.tgz`;
    expect(patch).toMatchObject({
      deploymentId: first.deployment.id,
      replaceSecrets: true,
      sourceRevisionConfig: { langgraph_config_path: 'langgraph.json', source_tarball_path: objectPath },
    });
    expect(out.text()).toContain('note: update-me is a dev deployment; the type is fixed when a deployment is created, so it stays dev');
    expect(out.text()).toContain(`Updating deployment update-me (${first.deployment.id})`);
  });

  it('leaves the secrets set by name alone when the project has no env file, and replaces them all when it has one', async () => {
    const dir = await project('keeps-secrets', 'FROM_ENV=1\n');
    const env = cliEnv(dir, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url });
    const first = await deploy(env, fast, () => undefined, dir);
    await rm(join(dir, '.env'));
    const out = capture();
    await deploy(env, fast, out.print, dir);
    const patch = fake.callsOf('updateDeployment').at(-1)!;
    expect(patch).toMatchObject({ deploymentId: first.deployment.id, replaceSecrets: false, secrets: [] });
    expect(out.text()).toContain('note: no .env here: the deployment keeps its secrets (FROM_ENV)');

    await writeFile(join(dir, '.env'), 'OTHER=2\n');
    await deploy(env, fast, () => undefined, dir);
    expect(fake.callsOf('updateDeployment').at(-1)).toMatchObject({ replaceSecrets: true, secrets: [expect.objectContaining({ name: 'OTHER', value: '2' })] });
  });

  it('prints JSON events with --json, and returns after the upload with --no-wait', async () => {
    const dir = await project('json-events');
    const env = cliEnv(dir, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url });
    const out = capture();
    await deploy(env, { ...fast, json: true }, out.print, dir);
    const events = out.lines.map((l) => JSON.parse(l) as { type: string; status?: string; deployment_url?: string });
    expect(new Set(events.map((e) => e.type))).toEqual(new Set(['step', 'upload_progress', 'status', 'log', 'result']));
    expect(events.filter((e) => e.type === 'status').map((e) => e.status)).toEqual(expect.arrayContaining(['BUILDING', 'DEPLOYED']));
    expect(events.at(-1)).toMatchObject({ type: 'result', status: 'succeeded', deployment_url: expect.stringContaining('/d/') });

    const quick = capture();
    const calls = fake.callsOf('getRevision').length;
    const submitted = await deploy(env, { ...fast, wait: false, json: true }, quick.print, dir);
    expect(submitted.status).toBe('submitted');
    expect(JSON.parse(quick.lines.at(-1)!)).toMatchObject({ type: 'result', status: 'submitted', revision_id: submitted.revisionId });
    expect(fake.callsOf('getRevision').length).toBe(calls);
  });

  it('fails with exit status, the status message and the last 30 log lines when the build fails', async () => {
    const dir = await project('broken');
    const env = cliEnv(dir, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url });
    const out = capture();
    await expect(deploy(env, fast, out.print, dir)).rejects.toThrow('the deployment of broken failed (BUILD_FAILED)');
    const text = out.text();
    expect(text).toMatch(/Revision \S+ ended BUILD_FAILED: the graphs failed to load/);
    const summary = out.lines.slice(out.lines.findIndex((l) => l.startsWith('Last 30 log lines')));
    expect(summary).toHaveLength(31);
    expect(summary.at(-2)).toMatch(/build  ERROR error TS2304/);
    // The pino line of the graph check: its level, message and the error's first stack line.
    expect(summary.at(-1)).toMatch(/build  ERROR graph failed to load err="TypeError: Cannot read properties of undefined" runId="run 1"$/);
    expect(summary.join('\n')).not.toContain('compile step 12\n');
    expect(summary[1]).toMatch(/compile step 13$/);
  });

  it('explains a missing langgraph.json, a refused key and an unreachable host', async () => {
    const empty = join(await mkdtemp(join(home, 'e-')), 'empty');
    await mkdir(empty);
    projects.push(empty);
    await expect(deploy(cliEnv(empty, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url }), fast, () => undefined, empty)).rejects.toThrow(
      /no langgraph\.json at .*run `berth deploy` in the folder of a LangGraph project/,
    );
    const dir = await project('refused');
    await expect(
      deploy(cliEnv(dir, { BERTH_HOST_URL: gateway.url }), { ...fast, apiKey: 'brt_key_wrongwrongwrongwrongwrongwrongwr' }, () => undefined, dir),
    ).rejects.toThrow(/refused the API key \(401: Invalid API key\): check --api-key or BERTH_API_KEY/);
    const closed = await freePort();
    await expect(deploy(cliEnv(dir, { BERTH_API_KEY: key }), { ...fast, url: `127.0.0.1:${closed}` }, () => undefined, dir)).rejects.toThrow(
      `cannot reach Berth at http://127.0.0.1:${closed} (ECONNREFUSED): check --url`,
    );
    await expect(
      deploy(cliEnv(dir, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url }), { ...fast, name: 'Not_Valid' }, () => undefined, dir),
    ).rejects.toThrow(/--name must be lower-case/);
    expect(fake.callsOf('createDeployment').some((c) => c.name === 'refused')).toBe(false);
  });
});

describe('berth deploy list / revisions / logs / delete', () => {
  it('lists, shows revisions, prints and follows logs, deletes', async () => {
    const dir = await project('managed');
    const env = cliEnv(dir, { BERTH_API_KEY: key, BERTH_HOST_URL: gateway.url });
    const first = await deploy(env, fast, () => undefined, dir);
    await deploy(env, fast, () => undefined, dir);

    const list = capture();
    const listed = await deployList(env, { nameContains: 'manag' }, list.print, dir);
    expect(listed.map((d) => d.name)).toEqual(['managed']);
    expect(list.lines[0]).toMatch(/^ID\s+NAME\s+TYPE\s+STATUS\s+URL$/);
    expect(list.lines[1]).toContain(`${gateway.url}/d/${first.deployment.id}`);

    const revs = capture();
    const revisions = await deployRevisions(env, { deployment: first.deployment.id, limit: 10 }, revs.print, dir);
    expect(revisions).toHaveLength(2);
    expect(revs.lines[1]).toContain('DEPLOYED (serving)');
    expect(revs.lines[2]).toContain('REPLACED');

    const logs = capture();
    const entries = await deployLogs(env, { limit: 2 }, logs.print, dir);
    expect(entries.map((e) => e.message)).toEqual([pino.listening, 'agent server ready']);
    expect(logs.lines[0]).toMatch(/^# logs of revision /);
    expect(logs.lines[1]).toMatch(/^# \d{4}-\d\d-\d\d$/);
    expect(logs.lines[2]).toMatch(/^\d\d:\d\d:\d\d deploy INFO {2}agent server listening url=http:\/\/127\.0\.0\.1:4100 graphs=echo,chat workers=10$/);
    // --json: the entries as stored, the raw line included.
    const raw = capture();
    await deployLogs(env, { limit: 2, json: true }, raw.print, dir);
    expect(raw.lines.map((l) => JSON.parse(l) as { message: string }).map((e) => e.message)).toEqual([pino.listening, 'agent server ready']);
    const build = await deployLogs(env, { name: 'managed', type: 'build', revisionId: first.revisionId }, () => undefined, dir);
    expect(build.map((e) => e.message)).toEqual(['npm ci']);

    // Follow: new lines of the latest revision appear as they are written.
    const follow = capture();
    const controller = new AbortController();
    const pagesBefore = fake.callsOf('getRevisionLogs').length;
    const following = deployLogs(env, { deploymentId: first.deployment.id, follow: true, signal: controller.signal }, follow.print, dir);
    await until('the first lines', () => (follow.lines.length ? true : undefined), 10_000, 20);
    const latest = fake.deployments.get(first.deployment.id)!.latestRevisionId;
    fake.addLog(latest, 'deploy', 'GET /ok 200');
    await until('the new line', () => (follow.lines.some((l) => l.includes('GET /ok 200')) ? true : undefined), 10_000, 20);
    controller.abort();
    const followed = await following;
    expect(followed.at(-1)!.message).toBe('GET /ok 200');
    expect(follow.lines.filter((l) => l.includes('GET /ok 200'))).toHaveLength(1);
    // One page of what there was, then one stream: no polling.
    expect(fake.callsOf('getRevisionLogs').length - pagesBefore).toBe(1);
    expect(fake.callsOf('followRevisionLogs')).toHaveLength(1);

    await expect(deployLogs(env, { name: 'nope' }, () => undefined, dir)).rejects.toThrow(/no deployment named nope/);

    const deleted = capture();
    await deployDelete(env, { deployment: 'managed', yes: true }, deleted.print, dir);
    expect(deleted.lines).toEqual([`Deleted deployment managed (${first.deployment.id}).`]);
    await expect(deployDelete(env, { deployment: first.deployment.id, yes: true }, () => undefined, dir)).rejects.toThrow(
      `no deployment named ${first.deployment.id} or with that id (\`berth deploy list\` shows your deployments)`,
    );
  });
});
