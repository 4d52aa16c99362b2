/**
 * `berth dev` through the built binary, on a copy of the echo test project (plus a graph that waits).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { appendFile, cp, mkdir, mkdtemp, readFile, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { Agent, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { listen } from '@berth/http';
import { spawnTestChild, until as waitUntil, type TestChild } from '@berth/testing';
import express from 'express';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
let project: string;
let dev: TestChild | undefined;
/** What `berth dev` printed so far. */
const output = () => dev?.output() ?? '';

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'berth-dev-'));
  await cp(join(repo, 'services/agent-runtime/test-projects/echo'), project, { recursive: true });
  // A graph whose run lasts until the test creates the file its input names; it notes the pid that ran it.
  // Its polling interval comes from a module of its own: what the project runs, one import away.
  await writeFile(join(project, 'src', 'gate-interval.ts'), 'export const INTERVAL_MS = 50;\n');
  await writeFile(
    join(project, 'src', 'gate.ts'),
    [
      "import { existsSync } from 'node:fs';",
      "import { Annotation, StateGraph } from '@langchain/langgraph';",
      "import { INTERVAL_MS } from './gate-interval.js';",
      'const State = Annotation.Root({',
      '  gate: Annotation<string>,',
      '  pids: Annotation<number[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),',
      '});',
      'export const graph = new StateGraph(State)',
      "  .addNode('wait', async (state) => {",
      '    while (!existsSync(state.gate)) await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));',
      '    return { pids: [process.pid] };',
      '  })',
      "  .addEdge('__start__', 'wait')",
      '  .compile();',
      '',
    ].join('\n'),
  );
  const config = JSON.parse(await readFile(join(project, 'langgraph.json'), 'utf8')) as { graphs: Record<string, unknown> };
  config.graphs.gate = './src/gate.ts:graph';
  await writeFile(join(project, 'langgraph.json'), JSON.stringify(config, null, 2));
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'echo', type: 'module' }));
  await symlink(join(repo, 'node_modules'), join(project, 'node_modules'));
});
// A test that failed half-way leaves its berth dev running: stop it before the next starts.
afterEach(async () => {
  await dev?.stop();
}, 30_000);
afterAll(async () => {
  // As root the cluster may live outside the (private) temp folder, linked from .berth/postgres.
  const cluster = await realpath(join(project, '.berth', 'postgres')).catch(() => undefined);
  if (cluster && !cluster.startsWith(project)) await rm(cluster, { recursive: true, force: true });
  await rm(project, { recursive: true, force: true });
});

/** Starts `berth dev` in the project; resolves with the URL that `ready` (the first group) prints. */
async function startDev(args: string[], ready: RegExp, env: Record<string, string> = {}): Promise<string> {
  dev = spawnTestChild(process.execPath, [bin, 'dev', '--port', '0', ...args], { cwd: project, env: { ...process.env, LOG_LEVEL: 'warn', ...env } });
  return (await dev.waitForOutput(ready))[1]!;
}

async function stopDev(): Promise<void> {
  expect(await dev!.stop()).toBe(0);
}

async function post<T>(url: string, body: unknown): Promise<T> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(response.status).toBe(200);
  return (await response.json()) as T;
}

/** The echo graph's reply to `text` in a run without a thread. */
async function reply(url: string, text: string): Promise<string | undefined> {
  const state = await post<{ messages: { content: string }[] }>(`${url}/runs/wait`, {
    assistant_id: 'echo',
    input: { messages: [{ role: 'user', content: text }] },
  });
  return state.messages.at(-1)?.content;
}

/** `until`, with what `berth dev` printed when it times out. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  return waitUntil(what, probe, timeoutMs, 200).catch((error: Error) => {
    throw new Error(`${error.message}; berth dev printed:\n${output()}`);
  });
}

const graphFile = () => join(project, 'src', 'graph.ts');

/** Makes the echo graph reply `<prefix>: <text>` from now on (an edit as an editor saves it). */
async function setPrefix(prefix: string): Promise<void> {
  const source = await readFile(graphFile(), 'utf8');
  await writeFile(graphFile(), source.replace(/const text = `[^:`]*: /, `const text = \`${prefix}: `));
}

describe('berth dev', () => {
  it('serves the project on a durable local Postgres until stopped; LANGGRAPH_CONFIG from the shell configures the system assistant', async () => {
    const url = await startDev([], /ready at (http:\/\/127\.0\.0\.1:\d+)/, { LANGGRAPH_CONFIG: '{"echo": {"configurable": {"from": "shell"}}}' });
    const [system] = await post<{ config: unknown }[]>(`${url}/assistants/search`, { graph_id: 'echo', metadata: { created_by: 'system' } });
    expect(system?.config).toEqual({ configurable: { from: 'shell' } });
    const result = (await (
      await fetch(`${url}/runs/wait`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'dev' }] } }),
      })
    ).json()) as { messages: { content: string }[] };
    expect(result.messages.at(-1)?.content).toBe('echo: dev');
    // State lives in the project's .berth/ folder.
    expect(await readFile(join(project, '.berth', 'postgres', 'data', 'PG_VERSION'), 'utf8')).toMatch(/^\d+\n$/);
    await stopDev();
  }, 60_000);

  it('serves one port from several processes with --processes, and stops them all', async () => {
    const url = await startDev(['--processes', '2'], /ready at (http:\/\/127\.0\.0\.1:\d+).*, 2 processes/);
    // Runs of one thread, sent to whichever process accepts them, all complete (one database, one queue).
    const thread = (await (await fetch(`${url}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as {
      thread_id: string;
    };
    const replies = await Promise.all(
      ['one', 'two', 'three', 'four'].map(async (text) => {
        const response = await fetch(`${url}/threads/${thread.thread_id}/runs/wait`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: text }] } }),
        });
        return ((await response.json()) as { messages: { content: string }[] }).messages.at(-1)?.content;
      }),
    );
    expect(replies.sort()).toEqual(['echo: four', 'echo: one', 'echo: three', 'echo: two']);
    const pids = (await new Promise<string>((resolve) => execFile('pgrep', ['-P', String(dev!.child.pid)], (_e, out) => resolve(out))))
      .trim()
      .split('\n')
      .filter(Boolean);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    await stopDev();
    for (const pid of pids) expect(() => process.kill(Number(pid), 0)).toThrow();
  }, 60_000);

  it('signs run webhooks with a secret it keeps in .berth/webhook-secret (0600), and lets them reach loopback receivers', async () => {
    const received: { headers: Record<string, string | string[] | undefined>; body: string }[] = [];
    const app = express();
    app.post('/hook', express.text({ type: '*/*' }), (req, res) => {
      received.push({ headers: req.headers, body: req.body as string });
      res.sendStatus(204);
    });
    const receiver = await listen(app, '127.0.0.1', 0);
    try {
      const url = await startDev(['--no-reload'], /ready at (http:\/\/127\.0\.0\.1:\d+)[^]*run webhooks are signed/);
      const file = join(project, '.berth', 'webhook-secret');
      expect(output()).toContain(`run webhooks are signed with the secret in ${file}`);
      expect((await stat(file)).mode & 0o777).toBe(0o600);
      const secret = (await readFile(file, 'utf8')).trim();
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
      await post(`${url}/runs/wait`, { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'hook' }] }, webhook: `${receiver.url}/hook?k=1` });
      const delivery = await until('the webhook', async () => received[0]);
      const { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature } = delivery.headers as Record<string, string>;
      const expected = createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
        .update(`${id}.${timestamp}.${delivery.body}`)
        .digest('base64');
      expect(signature).toBe(`v1,${expected}`);
      expect(JSON.parse(delivery.body)).toMatchObject({ assistant_id: expect.any(String), status: 'success' });
      await stopDev();
      // The same secret after a restart: a receiver set up once keeps verifying.
      await startDev(['--no-reload'], /ready at (http:\/\/127\.0\.0\.1:\d+)/);
      expect((await readFile(file, 'utf8')).trim()).toBe(secret);
      await stopDev();
    } finally {
      await receiver.close();
    }
  }, 90_000);

  it('reloads the graphs when a file changes, on the same port, keeping threads and runs; prints the Studio link', async () => {
    // Once it says so, it watches the project.
    const url = await startDev([], /ready at (http:\/\/127\.0\.0\.1:\d+)[^]*reloads when the project changes/);
    expect(output()).toContain(`Studio: ${url}/studio`);
    const thread = await post<{ thread_id: string }>(`${url}/threads`, {});
    await post(`${url}/threads/${thread.thread_id}/runs/wait`, { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'before' }] } });
    // A run executing across the reload, and one queued behind it on its thread.
    const gate = join(project, 'gate-open');
    const busy = await post<{ thread_id: string }>(`${url}/threads`, {});
    const inFlight = await post<{ run_id: string }>(`${url}/threads/${busy.thread_id}/runs`, { assistant_id: 'gate', input: { gate } });
    const queued = await post<{ run_id: string }>(`${url}/threads/${busy.thread_id}/runs`, { assistant_id: 'gate', input: { gate } });
    const status = async (runId: string) => ((await (await fetch(`${url}/threads/${busy.thread_id}/runs/${runId}`)).json()) as { status: string }).status;
    await until('the first run to start', async () => ((await status(inFlight.run_id)) === 'running' ? true : undefined));

    await setPrefix('echo v2');
    expect(await until('the new code', async () => ((await reply(url, 'x')) === 'echo v2: x' ? true : undefined), 20_000)).toBe(true);
    expect(output()).toContain('src/graph.ts changed: reloading');
    expect(output()).toContain(`reloaded: ${url} serves the new code`);
    expect(await status(inFlight.run_id)).toBe('running');
    await writeFile(gate, '');
    // The thread made before the reload, with its state.
    const state = (await (await fetch(`${url}/threads/${thread.thread_id}/state`)).json()) as { values: { messages: { content: string }[] } };
    expect(state.values.messages.map((m) => m.content)).toEqual(['before', 'echo: before']);
    // Both runs complete: the one in flight in the old process (which let it finish), the queued one in the new.
    for (const run of [inFlight, queued]) {
      expect(
        await until(`run ${run.run_id}`, async () => {
          const now = await status(run.run_id);
          return now === 'pending' || now === 'running' ? undefined : now;
        }),
      ).toBe('success');
    }
    const ran = (await (await fetch(`${url}/threads/${busy.thread_id}/state`)).json()) as { values: { pids: number[] } };
    expect(ran.values.pids).toHaveLength(2);
    expect(ran.values.pids[0]).not.toBe(ran.values.pids[1]);

    // Code that does not load: said so; the previous code keeps serving.
    await appendFile(graphFile(), '\nexport const broken = ;\n');
    await until('the failed reload', async () => (output().includes('reload failed') ? true : undefined), 20_000);
    expect(output()).toContain('src/graph.ts');
    expect(await reply(url, 'y')).toBe('echo v2: y');
    // The next save that fixes it reloads.
    await writeFile(graphFile(), (await readFile(graphFile(), 'utf8')).replace('\nexport const broken = ;\n', ''));
    await setPrefix('echo v3');
    expect(await until('the fixed code', async () => ((await reply(url, 'z')) === 'echo v3: z' ? true : undefined), 20_000)).toBe(true);
    await stopDev();
  }, 120_000);

  it('reloads for what the project runs — a module a graph imports, langgraph.json, the env file — not for data files or files nothing imports', async () => {
    await startDev([], /ready at (http:\/\/127\.0\.0\.1:\d+)[^]*reloads when the project changes/);
    const reloads = () => output().match(/^.* changed: reloading…$/gm) ?? [];
    const reloaded = async (count: number) =>
      until(`reload ${count}`, async () => ((output().match(/^reloaded: /gm) ?? []).length >= count ? true : undefined), 20_000);

    // What the JS dev server and the graphs themselves write, and a script no graph imports…
    await mkdir(join(project, '.langgraph_api'), { recursive: true });
    await writeFile(join(project, '.langgraph_api', 'store.json'), '{"runs": []}');
    await writeFile(join(project, 'results.json'), '[]');
    await writeFile(join(project, 'src', 'unused.ts'), 'export const unused = 1;\n');
    // …then a module one import away from a graph: that alone reloads.
    await writeFile(join(project, 'src', 'gate-interval.ts'), 'export const INTERVAL_MS = 40;\n');
    await reloaded(1);
    expect(reloads()).toEqual(['src/gate-interval.ts changed: reloading…']);

    await appendFile(join(project, '.env'), '\nGREETING=hello\n');
    await reloaded(2);
    expect(reloads().at(-1)).toBe('.env changed: reloading…');
    await writeFile(join(project, 'langgraph.json'), await readFile(join(project, 'langgraph.json'), 'utf8'));
    await reloaded(3);
    expect(reloads().at(-1)).toBe('langgraph.json changed: reloading…');
    expect(reloads()).toHaveLength(3);
    await stopDev();
  }, 120_000);

  it('a reload fails no request: those in flight get their answers, clients that keep their connections are told to close them, not cut off', async () => {
    const url = await startDev([], /ready at (http:\/\/127\.0\.0\.1:\d+)[^]*reloads when the project changes/);
    const gate = join(project, 'gate-keepalive');
    await rm(gate, { force: true });
    // Node's own keep-alive client, four connections at most: the requests after the runs reuse the runs' connections.
    const agent = new Agent({ keepAlive: true, maxSockets: 4 });
    try {
      const call = (method: string, path: string, body?: unknown) =>
        new Promise<{ status: number; connection: string | undefined }>((resolve, reject) => {
          const req = httpRequest(`${url}${path}`, { method, agent, headers: { 'content-type': 'application/json' } }, (res) => {
            res.resume();
            res.once('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }));
          });
          req.once('error', reject);
          req.end(body === undefined ? undefined : JSON.stringify(body));
        });
      // Clients that reuse their connections all along (fetch keeps them alive): every request must get its answer.
      let looping = true;
      let answered = 0;
      const failures: string[] = [];
      const loops = Array.from({ length: 3 }, async () => {
        while (looping) {
          try {
            const response = await fetch(`${url}/ok`);
            await response.arrayBuffer();
            if (response.ok) answered++;
            else failures.push(`status ${response.status}`);
          } catch (error) {
            failures.push(String((error as Error & { cause?: Error }).cause?.message ?? error));
          }
        }
      });
      // Requests in flight across the reload: runs that wait for the gate.
      const threads = await Promise.all([1, 2, 3, 4].map(() => post<{ thread_id: string }>(`${url}/threads`, {})));
      const inFlight = threads.map(({ thread_id }) => call('POST', `/threads/${thread_id}/runs/wait`, { assistant_id: 'gate', input: { gate } }));
      const running = async ({ thread_id }: { thread_id: string }) =>
        ((await (await fetch(`${url}/threads/${thread_id}/runs`)).json()) as { status: string }[]).some((run) => run.status === 'running');
      await until('the runs to start', async () => ((await Promise.all(threads.map(running))).every(Boolean) ? true : undefined));

      const before = (output().match(/^reloaded: /gm) ?? []).length;
      await setPrefix('echo kept');
      await until('the reload', async () => ((output().match(/^reloaded: /gm) ?? []).length > before ? true : undefined), 20_000);
      await writeFile(gate, '');
      expect((await Promise.all(inFlight)).map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      // The same connections at once, while the old processes finish: answered, then closed.
      expect((await Promise.all([1, 2, 3, 4].map(() => call('GET', '/ok')))).map((answer) => answer.status)).toEqual([200, 200, 200, 200]);
      looping = false;
      await Promise.all(loops);
      expect(failures).toEqual([]);
      expect(answered).toBeGreaterThan(0);
      expect(await reply(url, 'after')).toBe('echo kept: after');
    } finally {
      agent.destroy();
    }
    await stopDev();
  }, 120_000);

  it('does not reload with --no-reload', async () => {
    // Said where it would start watching: it watches no file, so no change can reload it (there is
    // no reload to wait for).
    const url = await startDev(['--no-reload'], /ready at (http:\/\/127\.0\.0\.1:\d+)[^]*does not reload \(--no-reload\)/);
    expect(output()).not.toContain('reloads when the project changes');
    const before = await reply(url, 'same');
    await setPrefix('echo v4');
    expect(await reply(url, 'same')).toBe(before);
    expect(output()).not.toContain('reloading');
    await stopDev();
  }, 60_000);

  it('explains a missing langgraph.json', async () => {
    const res = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [bin, 'dev', '--config', 'nope.json'], { cwd: project }, (error, _o, stderr) => resolve({ code: error ? 1 : 0, stderr })),
    );
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no nope.json here');
  });

  it('traces runs into the platform it finds, in a project of its own named after the folder (never the deployment’s); --no-trace and the developer’s own LANGSMITH_* settings turn that off', async () => {
    // The platform's side of it: the key check (/v1/me) and the trace API's ingest.
    const sessions: string[] = [];
    const keys: string[] = [];
    const platform = express();
    platform.get('/v1/me', (req, res) => void res.status(req.headers['x-api-key'] === 'brt_key_dev' ? 200 : 401).json({}));
    platform.get('/info', (_req, res) => void res.json({}));
    platform.post('/runs/multipart', express.raw({ type: () => true, limit: '10mb' }), (req, res) => {
      keys.push(String(req.headers['x-api-key']));
      sessions.push(...[...(req.body as Buffer).toString('latin1').matchAll(/"session_name":"([^"]+)"/g)].map((m) => m[1]!));
      res.status(202).json({});
    });
    const server = await listen(platform, '127.0.0.1', 0);
    const settings = { BERTH_HOST_URL: server.url, BERTH_API_KEY: 'brt_key_dev' };
    // Ready once it said where traces go.
    const tracesLine = /ready at (http:\/\/127\.0\.0\.1:\d+)[\s\S]*traces: [^\n]*\n/;
    try {
      const url = await startDev([], tracesLine, settings);
      // A deployment of this folder traces into the project named after it: berth dev's is `<folder> (dev)`.
      const folder = `${basename(project)} (dev)`;
      expect(output()).toContain(`traces: ${server.url}, project ${folder}`);
      expect(await reply(url, 'traced')).toMatch(/: traced$/);
      await until('the run’s trace', async () => (sessions.length ? true : undefined));
      expect(new Set(sessions)).toEqual(new Set([folder]));
      expect(new Set(keys)).toEqual(new Set(['brt_key_dev']));
      await stopDev();

      await startDev(['--no-trace'], tracesLine, settings);
      expect(output()).toContain('traces: off (--no-trace)');
      await stopDev();

      await startDev([], tracesLine, { ...settings, LANGSMITH_TRACING: 'false' });
      expect(output()).toContain('traces: as your LANGSMITH_TRACING say (LangSmith); Berth adds none');
      await stopDev();
    } finally {
      await server.close();
    }
  }, 90_000);
});
