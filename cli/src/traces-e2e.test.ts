/**
 * Every agent-server run is traced, end to end with all real parts: the whole platform as `berth up`
 * starts it (gateway, control plane with the local deployer, export-worker on a test Postgres), the
 * built `berth` binary deploying the traced test project (two nodes; the second calls a fake model
 * that reports token usage, and throws when the human says `fail`) and running it with `berth dev`,
 * the LangGraph SDK making runs, and the official `langsmith` Client reading the traces back from
 * the gateway with a tenant's API key.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cp, mkdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client as AgentClient } from '@langchain/langgraph-sdk';
import { spawnTestChild, until, type TestChild } from '@berth/testing';
import { Client as TraceClient, type Run } from 'langsmith';
import type { RunningPlatform } from './platform.js';
import { startTestPlatform, testEngine, type TestPlatform } from './__tests__/test-platform.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
const tracedProject = join(repo, 'services/agent-runtime/test-projects/traced');
const FAILURE = 'the answer node failed on purpose';

let stack: TestPlatform;
let platform: RunningPlatform;
let temp: string;
/** API keys of two tenants: A deploys and traces, B must see none of it. */
let keyA: string;
let keyB: string;

/** A tenant with an admin API key, made with the bootstrap key as `berth tenants create` does. */
async function tenantKey(adminKey: string, name: string): Promise<string> {
  const response = await fetch(`${platform.url}/v1/tenants`, {
    method: 'POST',
    headers: { 'x-api-key': adminKey, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
  expect(response.status).toBe(201);
  return ((await response.json()) as { api_key: { key: string } }).api_key.key;
}

/** The traced test project in a folder of its own, with the dependencies the echo-agent example pins. */
async function projectFolder(name: string): Promise<string> {
  const folder = join(temp, name);
  await cp(tracedProject, folder, { recursive: true });
  for (const file of ['package.json', 'package-lock.json']) await cp(join(repo, 'examples/echo-agent', file), join(folder, file));
  return folder;
}

const traces = (key: string) => new TraceClient({ apiUrl: platform.url, apiKey: key, callerOptions: { maxRetries: 0 } });

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

/** Runs LangGraph hides from traces (its own plumbing, e.g. `__start__`). */
const visible = (runs: Run[]) => runs.filter((r) => !(r.tags ?? []).includes('langsmith:hidden'));

/**
 * The runs of project `project` once the root runs of the agent-server runs `runIds` and every
 * run of their traces have ended (a run's end arrives as a later patch).
 */
async function tracedRuns(client: TraceClient, project: string, runIds: string[], timeoutMs = 30_000): Promise<Run[]> {
  return until(
    `the traces of runs ${runIds.join(', ')} in project ${project}`,
    async () => {
      const runs = await collect(client.listRuns({ projectName: project })).catch((error: unknown) => {
        // The project appears with its first run (the client says so in words, without a status).
        if (/not found/.test((error as Error).message)) return [];
        throw error;
      });
      const roots = runIds.map((id) => runs.find((r) => !r.parent_run_id && r.extra?.metadata?.run_id === id));
      if (!roots.every((root) => root?.end_time)) return undefined;
      const traceIds = new Set(roots.map((root) => root!.id));
      const traced = runs.filter((r) => traceIds.has(r.trace_id!));
      return traced.every((r) => r.end_time) ? traced : undefined;
    },
    timeoutMs,
    300,
  );
}

/** What a user checks in one trace: root, its node runs, the llm run. */
function trace(runs: Run[], runId: string) {
  const root = runs.find((r) => !r.parent_run_id && r.extra?.metadata?.run_id === runId)!;
  const inTrace = visible(runs.filter((r) => r.trace_id === root.id));
  const nodes = inTrace.filter((r) => r.parent_run_id === root.id);
  return { root, nodes, node: (name: string) => nodes.find((r) => r.name === name), llm: inTrace.filter((r) => r.run_type === 'llm') };
}

/** `berth deploy --json` of `folder` as tenant A (its .env names the platform and key); the result event. */
async function deploy(folder: string): Promise<{ deployment_id: string; deployment_url: string }> {
  await writeFile(join(folder, '.env'), `BERTH_API_KEY=${keyA}\nBERTH_HOST_URL=${platform.url}\n`);
  const deployed = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      [bin, 'deploy', '--json'],
      {
        cwd: folder,
        env: { PATH: process.env.PATH ?? '', HOME: temp, XDG_CONFIG_HOME: join(temp, 'config'), BERTH_STATE_DIR: join(temp, 'cli-state') },
        timeout: 240_000,
      },
      (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr }),
    ),
  );
  expect({ code: deployed.code, stderr: deployed.stderr }).toEqual({ code: 0, stderr: '' });
  const result = JSON.parse(deployed.stdout.trim().split('\n').at(-1)!) as { status: string; deployment_id: string; deployment_url: string };
  expect(result.status).toBe('succeeded');
  return result;
}

/** Makes a run of the `traced` graph with `text` as the human message (`fail` fails it); its id and final status. */
function agentRun(url: string, apiKey?: string): (text: string) => Promise<{ id: string; status: string }> {
  const agent = new AgentClient({ apiUrl: url, ...(apiKey ? { apiKey } : {}), callerOptions: { maxRetries: 0 } });
  return async (text) => {
    const thread = await agent.threads.create();
    const run = await agent.runs.create(thread.thread_id, 'traced', { input: { messages: [{ role: 'user', content: text }] } });
    await agent.runs.join(thread.thread_id, run.run_id);
    return { id: run.run_id, status: (await agent.runs.get(thread.thread_id, run.run_id)).status };
  };
}

beforeAll(async () => {
  // As `berth up` as root: deployments in containers.
  stack = await startTestPlatform('traces-e2e', { sandboxes: testEngine() });
  ({ platform, temp } = stack);
  const admin = stack.adminKey;
  keyA = await tenantKey(admin, 'traces-a');
  keyB = await tenantKey(admin, 'traces-b');
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

describe('a deployed project', () => {
  it('traces each run into the project named after the deployment: root, node and llm runs with tokens, errors; for its tenant only', async () => {
    const folder = await projectFolder('traced-agent');
    const result = await deploy(folder);

    // One run that succeeds, one that fails in its second node, through the deployment URL.
    const runOf = agentRun(result.deployment_url, keyA);
    const ok = await runOf('hi');
    const failed = await runOf('fail');
    expect([ok.status, failed.status]).toEqual(['success', 'error']);

    const client = traces(keyA);
    const runs = await tracedRuns(client, 'traced-agent', [ok.id, failed.id]);
    // The project is the deployment's own (its session_id).
    const deployment = (await (await fetch(`${platform.url}/v2/deployments/${result.deployment_id}`, { headers: { 'x-api-key': keyA } })).json()) as {
      session_id: string;
    };
    const project = await client.readProject({ projectName: 'traced-agent' });
    expect(project.id).toBe(deployment.session_id);
    expect(new Set(runs.map((r) => r.session_id))).toEqual(new Set([project.id]));

    const good = trace(runs, ok.id);
    expect(good.root).toMatchObject({ name: 'LangGraph', run_type: 'chain', status: 'success' });
    expect(good.root.error ?? null).toBeNull();
    expect(good.nodes.map((r) => r.name).sort()).toEqual(['answer', 'plan']);
    expect(good.llm).toHaveLength(1);
    const [llm] = good.llm;
    expect(llm).toMatchObject({ prompt_tokens: 11, completion_tokens: 7, total_tokens: 18, status: 'success' });
    expect(llm!.parent_run_ids ?? []).toContain(good.node('answer')!.id);
    expect(JSON.stringify(llm!.outputs)).toContain('model: planned: hi');

    const bad = trace(runs, failed.id);
    expect(bad.root).toMatchObject({ name: 'LangGraph', status: 'error' });
    expect(bad.root.error).toContain(FAILURE);
    expect(bad.node('answer')).toMatchObject({ status: 'error' });
    expect(bad.node('answer')!.error).toContain(FAILURE);
    expect(bad.node('plan')).toMatchObject({ status: 'success' });
    // Filters a user would reach for.
    const errors = await collect(client.listRuns({ projectName: 'traced-agent', isRoot: true, error: true }));
    expect(errors.map((r) => r.id)).toEqual([bad.root.id]);

    // The other tenant sees neither the project nor its runs.
    const other = traces(keyB);
    await expect(other.readProject({ projectName: 'traced-agent' })).rejects.toThrow(/not found/);
    expect((await collect(other.listProjects())).map((p) => p.id)).not.toContain(project.id);
    await expect(other.readRun(good.root.id)).rejects.toMatchObject({ status: 404 });
    expect(await collect(other.listRuns({ projectId: project.id }))).toEqual([]);
  }, 300_000);
});

describe('berth dev', () => {
  let dev: TestChild | undefined;
  let folder: string;
  afterEach(async () => {
    await dev?.stop();
  }, 30_000);
  afterAll(async () => {
    // As root the cluster may live outside the temp folder, linked from .berth/postgres.
    const cluster = folder && (await realpath(join(folder, '.berth', 'postgres')).catch(() => undefined));
    if (cluster && !cluster.startsWith(folder)) await rm(cluster, { recursive: true, force: true });
  });

  it('traces a run into a project of its own named after the folder, `<folder> (dev)`, through the real gateway and export-worker', async () => {
    folder = await projectFolder('my-dev-agent');
    await symlink(join(repo, 'node_modules'), join(folder, 'node_modules'));
    await mkdir(join(temp, 'dev-config'), { recursive: true });
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^(LANGSMITH|LANGCHAIN|BERTH)_/.test(name))) as Record<string, string>;
    const started = spawnTestChild(process.execPath, [bin, 'dev', '--port', '0', '--no-reload'], {
      cwd: folder,
      env: { ...env, LOG_LEVEL: 'warn', XDG_CONFIG_HOME: join(temp, 'dev-config'), BERTH_HOST_URL: platform.url, BERTH_API_KEY: keyA },
    });
    dev = started;
    const [, url] = await started.waitForOutput(/ready at (http:\/\/127\.0\.0\.1:\d+)[\s\S]*traces: [^\n]*\n/, { timeoutMs: 100_000 });
    expect(started.output()).toContain(`traces: ${platform.url}, project ${basename(folder)} (dev)`);

    const run = await agentRun(url!)('from dev');
    const runs = await tracedRuns(traces(keyA), 'my-dev-agent (dev)', [run.id]).catch((error: Error) => {
      throw new Error(`${error.message}; berth dev printed:\n${started.output()}`);
    });
    const { root, nodes, llm } = trace(runs, run.id);
    expect(root).toMatchObject({ name: 'LangGraph', status: 'success' });
    expect(nodes.map((r) => r.name).sort()).toEqual(['answer', 'plan']);
    expect(llm.map((r) => r.total_tokens)).toEqual([18]);
    await expect(traces(keyB).readProject({ projectName: 'my-dev-agent (dev)' })).rejects.toThrow(/not found/);
  }, 120_000);

  it("the deployment of the folder berth dev traced traces into its own project, never berth dev's", async () => {
    // The usual path: `berth dev` in my-dev-agent/ (the test above) traced into "my-dev-agent (dev)",
    // then `berth deploy` there makes the deployment my-dev-agent, whose runs trace into project my-dev-agent.
    const devProject = await traces(keyA).readProject({ projectName: 'my-dev-agent (dev)' });
    const result = await deploy(folder);
    const run = await agentRun(result.deployment_url, keyA)('deployed');
    expect(run.status).toBe('success');
    const runs = await tracedRuns(traces(keyA), 'my-dev-agent', [run.id]);
    const project = await traces(keyA).readProject({ projectName: 'my-dev-agent' });
    expect(project.id).not.toBe(devProject.id);
    expect(trace(runs, run.id).root).toMatchObject({ name: 'LangGraph', status: 'success', session_id: project.id });
    // The deployment names that project as its own, so an export of its session_id has these runs.
    const deployment = (await (await fetch(`${platform.url}/v2/deployments/${result.deployment_id}`, { headers: { 'x-api-key': keyA } })).json()) as {
      session_id: string;
    };
    expect(deployment.session_id).toBe(project.id);
  }, 300_000);
});
