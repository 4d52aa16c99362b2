/**
 * `berth backup` and `berth restore` on a whole platform as `berth up` runs it (its own Postgres
 * cluster under the state folder, deployments in the tests' Podman engine): a backup taken while it
 * serves, the installation then lost, the backup restored into a fresh state folder — and the
 * tenant's key, the deployment (serving again, its sealed secret opened), its thread, its trace and
 * the export destination are all there.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { chmod, cp, mkdtemp, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { PostgresServer } from '@berth/local-stack';
import { silentLogger } from '@berth/log';
import { createTestBucket, testS3, until } from '@berth/testing';
import { Client as TraceClient } from 'langsmith';
import { loadCliEnv } from './env.js';
import { startPlatform, type RunningPlatform } from './platform.js';
import { bootstrapKey } from './__tests__/bootstrap-key.js';
import { callApi } from './__tests__/call-api.js';
import { testEngine } from './__tests__/test-platform.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
const DEPLOY_MS = 240_000;
/** The restored deployment's agent server starting again. */
const RESTART_MS = 60_000;

let temp: string;
const clusters: PostgresServer[] = [];
const platforms: RunningPlatform[] = [];

/** The platform of state folder `stateDir` as `berth up` runs it: Postgres under it, then every service. */
async function startInstallation(stateDir: string): Promise<{ platform: RunningPlatform; databaseUrl: string }> {
  const cluster = new PostgresServer({ baseDir: join(stateDir, 'postgres'), mode: 'fast' });
  clusters.push(cluster);
  const { connectionString } = await cluster.start();
  const platform = await startPlatform(
    {
      databaseUrl: connectionString,
      host: '127.0.0.1',
      port: 0,
      logLevel: 'silent',
      stateDir,
      processEnv: loadCliEnv().processEnv,
      sandboxes: testEngine(),
    },
    silentLogger(),
  );
  platforms.push(platform);
  return { platform, databaseUrl: connectionString };
}

function berth(args: string[], env: Record<string, string>, cwd = temp): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      process.execPath,
      [bin, ...args],
      { cwd, env: { PATH: process.env.PATH ?? '', HOME: temp, XDG_CONFIG_HOME: join(temp, 'config'), ...env }, timeout: DEPLOY_MS },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

beforeAll(async () => {
  temp = await mkdtemp(join(tmpdir(), 'berth-backup-'));
  // As `berth up` keeps its state folder: the deployments' users (as root) pass through to their builds.
  await chmod(temp, 0o711);
});
afterAll(async () => {
  for (const platform of platforms) await platform.close().catch(() => undefined);
  for (const cluster of clusters) {
    await cluster.stop().catch(() => undefined);
    // As root the cluster may live outside the temp folder, linked from <state>/postgres.
    const real = await realpath(cluster.baseDir).catch(() => undefined);
    if (real && !real.startsWith(temp)) await rm(real, { recursive: true, force: true });
  }
  await rm(temp, { recursive: true, force: true });
}, 120_000);

describe('berth backup and berth restore', () => {
  it('bring a serving installation back in a fresh state folder: keys, deployment serving with its secret, thread, trace, export destination', async () => {
    const stateA = join(temp, 'a');
    const { platform: a, databaseUrl } = await startInstallation(stateA);
    const key = await bootstrapKey(databaseUrl);
    const me = await callApi(a.url, key, '/v1/me');

    // A deployment whose graph answers with a secret of its .env, and a conversation with it.
    const project = join(temp, 'restored-agent');
    await cp(join(repo, 'examples/echo-agent'), project, { recursive: true, filter: (path) => !path.includes('node_modules') });
    await writeFile(
      join(project, 'src/graph.ts'),
      `import { AIMessage } from '@langchain/core/messages';
import { MessagesValue, StateGraph, StateSchema } from '@langchain/langgraph';
const State = new StateSchema({ messages: MessagesValue });
const respond = (state: typeof State.State) => ({ messages: [new AIMessage(process.env.GREETING + ': ' + (state.messages.at(-1)?.text ?? ''))] });
export const graph = new StateGraph(State).addNode('respond', respond).addEdge('__start__', 'respond').addEdge('respond', '__end__').compile();
`,
    );
    await writeFile(join(project, '.env'), `BERTH_API_KEY=${key}\nBERTH_HOST_URL=${a.url}\nGREETING=ahoy\n`);
    const deployed = await berth(['deploy', '--json'], { BERTH_STATE_DIR: join(temp, 'cli-state') }, project);
    expect({ code: deployed.code, stderr: deployed.stderr }).toEqual({ code: 0, stderr: '' });
    const { deployment_id: deploymentId } = JSON.parse(deployed.stdout.trim().split('\n').at(-1)!) as { deployment_id: string };
    const agentOf = (url: string) => new Client({ apiUrl: `${url}/d/${deploymentId}`, apiKey: key, callerOptions: { maxRetries: 0 } });
    const thread = await agentOf(a.url).threads.create();
    await agentOf(a.url).runs.wait(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: 'before' }] } });
    const traces = (url: string) => new TraceClient({ apiUrl: url, apiKey: key, callerOptions: { maxRetries: 0 } });
    const traced = async (url: string) => {
      const runs = [];
      for await (const run of traces(url).listRuns({ projectName: 'restored-agent', isRoot: true })) runs.push(run);
      return runs.filter((r) => r.extra?.metadata?.thread_id === thread.thread_id && r.end_time).map((r) => r.id);
    };
    const traceIds = await until('the run traced', async () => ((await traced(a.url).catch(() => [])).length ? traced(a.url) : undefined), 60_000, 300);
    const s3 = testS3();
    const destination = await callApi(a.url, key, '/api/v1/bulk-exports/destinations', {
      method: 'POST',
      json: {
        destination_type: 's3',
        display_name: 'archive',
        config: { bucket_name: await createTestBucket('restore'), prefix: 'traces', endpoint_url: s3.endpoint, region: s3.region },
        credentials: { access_key_id: s3.accessKeyId, secret_access_key: s3.secretAccessKey },
      },
    });
    expect(destination.status).toBe(200);

    // The backup, while everything serves.
    const archive = join(temp, 'backups', 'berth.tar.gz');
    const backedUp = await berth(['backup', '--output', archive], { BERTH_STATE_DIR: stateA });
    expect({ code: backedUp.code, stderr: backedUp.stderr }).toEqual({ code: 0, stderr: '' });
    expect(backedUp.stdout).toContain('1 deployment database(s), the secret key');
    expect((await stat(archive)).mode & 0o777).toBe(0o600);

    // The installation is lost: platform, cluster and state folder.
    await a.close();
    await clusters[0]!.stop();
    const realCluster = await realpath(clusters[0]!.baseDir);
    await rm(stateA, { recursive: true, force: true });
    await rm(realCluster, { recursive: true, force: true });

    const stateB = join(temp, 'b');
    const restored = await berth(['restore', archive], { BERTH_STATE_DIR: stateB });
    expect({ code: restored.code, stderr: restored.stderr }).toEqual({ code: 0, stderr: '' });
    expect(restored.stdout).toMatch(/restored the platform database \(\d+ rows, as backed up\)/);
    expect(restored.stdout).toContain('restored secret-key');
    // A second restore into the same folder would mix two installations: refused.
    const again = await berth(['restore', archive], { BERTH_STATE_DIR: stateB });
    expect({ code: again.code, stderr: again.stderr }).toEqual({ code: 1, stderr: expect.stringContaining('already holds an installation') });

    const { platform: b } = await startInstallation(stateB);
    expect((await callApi(b.url, key, '/v1/me')).body).toEqual(me.body);
    // The deployment comes back by itself, its secret opened with the restored key; its thread has its history.
    let lastError: unknown;
    const answer = await until(
      'the restored deployment serving',
      async () => {
        const state = (await agentOf(b.url)
          .runs.wait(thread.thread_id, 'echo', { input: { messages: [{ role: 'user', content: 'after' }] } })
          .catch((error: unknown) => void (lastError = error))) as { messages: { content: string }[] } | undefined;
        return state?.messages.map((m) => m.content);
      },
      RESTART_MS,
      1000,
    ).catch(async (error: Error) => {
      const deployment = await callApi(b.url, key, `/v2/deployments/${deploymentId}`);
      const revisions = await callApi(b.url, key, `/v2/deployments/${deploymentId}/revisions`);
      throw new Error(
        `${error.message}; last answer: ${String(lastError)}; the deployment: ${JSON.stringify(deployment.body)}; revisions: ${JSON.stringify(revisions.body)}`,
      );
    });
    expect(answer).toEqual(['before', 'ahoy: before', 'after', 'ahoy: after']);
    expect(await traced(b.url)).toEqual(expect.arrayContaining(traceIds));
    const destinations = await callApi(b.url, key, '/api/v1/bulk-exports/destinations');
    expect(destinations.body.map((d: { id: string; display_name: string }) => [d.id, d.display_name])).toEqual([[destination.body.id, 'archive']]);
  }, 900_000);

  it('refuses a file that is not a backup, and says why', async () => {
    const bogus = join(temp, 'not-a-backup.tar.gz');
    await writeFile(bogus, 'hello');
    const result = await berth(['restore', bogus], { BERTH_STATE_DIR: join(temp, 'c') });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`${bogus} is not a Berth backup`);
  });
});
