/**
 * `berth deploy` end to end: the built binary, run in a copy of examples/echo-agent, against the
 * whole platform in this process (gateway, control plane with the local deployer, …) on a test
 * Postgres. Then the LangGraph SDK talks to the printed deployment URL, a redeploy switches what
 * it answers, and deleting the deployment takes the URL away.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { cp, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@langchain/langgraph-sdk';
import { until } from '@berth/testing';
import type { RunningPlatform } from './platform.js';
import { startTestPlatform, testEngine, type TestPlatform } from './__tests__/test-platform.js';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));

let stack: TestPlatform;
let platform: RunningPlatform;
let temp: string;
let project: string;
let apiKey: string;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function berth(args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [bin, ...args],
      {
        cwd: project,
        // No BERTH_* from the developer's shell: the key comes from the project's .env.
        env: { PATH: process.env.PATH ?? '', HOME: temp, XDG_CONFIG_HOME: join(temp, 'config'), BERTH_STATE_DIR: join(temp, 'cli-state'), ...env },
        timeout: 240_000,
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

function events(stdout: string): { type: string; [key: string]: unknown }[] {
  return stdout
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string });
}

/** Whether the deploy log of a revision says it was retired (it no longer serves). */
async function retired(deploymentId: string, revisionId: string): Promise<boolean> {
  const response = await fetch(`${platform.url}/v2/deployments/${deploymentId}/revisions/${revisionId}/logs?type=deploy&limit=1000`, {
    headers: { 'x-api-key': apiKey },
  });
  const { logs } = (await response.json()) as { logs: { message: string }[] };
  return logs.some((l) => l.message === 'retired: it no longer serves');
}

async function reply(url: string, text: string): Promise<unknown> {
  const client = new Client({ apiUrl: url, apiKey, callerOptions: { maxRetries: 0 } });
  const state = (await client.runs.wait(null, 'echo', { input: { messages: [{ role: 'user', content: text }] } })) as {
    messages: { content: unknown }[];
  };
  return state.messages.at(-1)?.content;
}

beforeAll(async () => {
  // As `berth up` as root: deployments in containers.
  stack = await startTestPlatform('deploy-e2e', { sandboxes: testEngine() });
  ({ platform, temp } = stack);
  apiKey = stack.adminKey;
  project = join(temp, 'echo-agent');
  await cp(join(repo, 'examples/echo-agent'), project, { recursive: true, filter: (path) => !path.includes('node_modules') });
  await writeFile(join(project, '.env'), `BERTH_API_KEY=${apiKey}\nBERTH_HOST_URL=${platform.url}\nECHO_MODE=plain\n`);
}, 120_000);
afterAll(async () => {
  await stack?.close();
});

describe('berth deploy (end to end)', () => {
  it('deploys examples/echo-agent, serves it to the SDK at the printed URL, redeploys and deletes it', async () => {
    expect(platform.isolation).toBe("each deployment runs in a container of its own, on the platform's Podman engine");
    const first = await berth(['deploy']);
    expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: '' });
    expect(first.stdout).toContain('note: not sent as secrets');
    expect(first.stdout).toContain('Secrets from .env: ECHO_MODE');
    const firstRevision = /Revision (\S+): DEPLOYED/.exec(first.stdout)?.[1];
    expect(firstRevision).toBeDefined();
    const url = /^ {2}(http:\/\/\S+\/d\/[0-9a-f-]{36})$/m.exec(first.stdout)?.[1];
    expect(url).toBeDefined();
    const id = url!.split('/d/')[1]!;
    expect(await reply(url!, 'hi')).toBe('echo: hi');

    // A redeploy of changed code: same URL, new answer, as JSON events.
    const graph = join(project, 'src/graph.ts');
    await writeFile(graph, (await readFile(graph, 'utf8')).replace('AIMessage(`echo: ', 'AIMessage(`echo v2: '));
    // A client looping on the deployment URL during the switch sees no failed request.
    let looping = true;
    const answers: string[] = [];
    const failures: unknown[] = [];
    const loop = (async () => {
      while (looping)
        await reply(url!, 'x').then(
          (text) => answers.push(String(text)),
          (error: unknown) => failures.push(error),
        );
    })();
    const second = await berth(['deploy', '--json']).finally(async () => {
      // On past the old revision's retirement (a few seconds after the switch), and then through
      // a few more calls: none may reach the retired agent server.
      await until('the old revision to be retired', () => retired(id, firstRevision!), 60_000, 250);
      const after = answers.length + failures.length;
      await until('calls after the retirement', () => answers.length + failures.length >= after + 3, 60_000, 50);
      looping = false;
      await loop;
    });
    expect(second.code).toBe(0);
    const result = events(second.stdout).at(-1)!;
    expect(result).toMatchObject({ type: 'result', status: 'succeeded', deployment_url: url });
    expect(await reply(url!, 'hi')).toBe('echo v2: hi');
    expect(failures).toEqual([]);
    expect(answers).toContain('echo: x');
    expect(answers).toContain('echo v2: x');

    // A version that does not load fails its build; the deployed one keeps serving.
    const good = await readFile(graph, 'utf8');
    await writeFile(graph, 'export const graph = (;\n');
    const broken = await berth(['deploy']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/BUILD_FAILED/);
    expect(await reply(url!, 'hi')).toBe('echo v2: hi');
    await writeFile(graph, good);

    const list = await berth(['deploy', 'list']);
    expect(list.stdout).toMatch(new RegExp(`echo-agent\\s+dev\\s+\\S+\\s+${url!.replace(/[.]/g, '\\.')}`));
    const logs = await berth(['deploy', 'logs', '--type', 'build']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toMatch(/build/);

    const revisions = await berth(['deploy', 'revisions', id]);
    expect(revisions.stdout).toContain('DEPLOYED (serving)');
    expect(revisions.stdout).toContain('REPLACED');

    expect((await berth(['deploy', 'delete', id, '--yes'])).stdout).toContain(`Deleted deployment echo-agent (${id}).`);
    await until('the deployment URL to answer 404', async () => (await fetch(`${url}/ok`, { headers: { 'x-api-key': apiKey } })).status === 404, 10_000, 250);
  }, 300_000);

  it('fails with exit 1 and the build log when a graph does not load', async () => {
    const graph = join(project, 'src/graph.ts');
    await writeFile(graph, 'export const graph = (;\n');
    const broken = await berth(['deploy', '--name', 'echo-broken']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/Revision \S+ ended BUILD_FAILED/);
    expect(broken.stdout).toMatch(/Last \d+ log lines:/);
    expect(broken.stderr).toContain('the deployment of echo-broken failed (BUILD_FAILED)');
  }, 300_000);
});
