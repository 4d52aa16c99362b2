/**
 * `make install`'s script links this checkout's `berth` into a folder of the PATH: the command then
 * works from any folder, and `berth dev` serves a user's own project outside the repository.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readlink, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { spawnTestChild, type TestChild } from '@berth/testing';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const script = join(repo, 'scripts', 'install-cli.sh');
let temp: string;
let bindir: string;
let project: string;
let dev: TestChild | undefined;

function exec(
  file: string,
  args: string[],
  options: { cwd?: string; env?: Record<string, string> } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(file, args, { cwd: options.cwd ?? temp, env: { ...process.env, ...options.env }, timeout: 60_000 }, (error, stdout, stderr) =>
      resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

beforeAll(async () => {
  temp = await realpath(await mkdtemp(join(tmpdir(), 'berth-install-')));
  bindir = join(temp, 'bin');
  // A user's LangGraph.js project of their own: package.json, langgraph.json, a graph, an env file.
  project = join(temp, 'my-agent');
  await mkdir(join(project, 'src'), { recursive: true });
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'my-agent', private: true, type: 'module' }));
  await writeFile(join(project, 'langgraph.json'), JSON.stringify({ graphs: { agent: './src/agent.ts:graph' }, env: '.env' }));
  await writeFile(join(project, '.env'), 'GREETING=hello\n');
  await writeFile(
    join(project, 'src', 'agent.ts'),
    [
      "import { AIMessage } from '@langchain/core/messages';",
      "import { MessagesAnnotation, StateGraph } from '@langchain/langgraph';",
      'export const graph = new StateGraph(MessagesAnnotation)',
      "  .addNode('reply', (state) => ({ messages: [new AIMessage(`${process.env.GREETING}: ${state.messages.at(-1)?.text}`)] }))",
      "  .addEdge('__start__', 'reply')",
      '  .compile();',
      '',
    ].join('\n'),
  );
  // What `npm install @langchain/langgraph @langchain/core` gives the project (no registry here).
  await mkdir(join(project, 'node_modules'));
  await symlink(join(repo, 'node_modules', '@langchain'), join(project, 'node_modules', '@langchain'));
});
afterAll(async () => {
  await dev?.stop();
  // As root the cluster may live outside the (private) temp folder, linked from .berth/postgres.
  const cluster = await realpath(join(project, '.berth', 'postgres')).catch(() => undefined);
  if (cluster && !cluster.startsWith(temp)) await rm(cluster, { recursive: true, force: true });
  await rm(temp, { recursive: true, force: true });
});

describe('make install', () => {
  it('links berth into BINDIR, where it runs from any folder; uninstall removes only its own link', async () => {
    const installed = await exec(script, ['install'], { env: { BINDIR: bindir } });
    expect(installed.stderr).toBe('');
    expect(installed.code).toBe(0);
    expect(installed.stdout).toContain(`installed ${bindir}/berth`);
    expect(installed.stdout).toContain(`${bindir} is not on your PATH`);
    expect(await readlink(join(bindir, 'berth'))).toBe(join(repo, 'cli', 'bin', 'berth.js'));

    const version = await exec(join(bindir, 'berth'), ['version'], { cwd: project });
    expect(version).toMatchObject({ code: 0, stdout: expect.stringMatching(/^\d+\.\d+\.\d+\n$/) });
    // Found by name once BINDIR is on the PATH, as docs/get-started/install-cli.md says.
    const byName = await exec('berth', ['--help'], { cwd: temp, env: { PATH: `${bindir}:${process.env.PATH}` } });
    expect(byName.stdout).toContain('Usage: berth');

    // Someone else's `berth` is never replaced or removed.
    const other = join(temp, 'other-bin');
    await mkdir(other);
    await writeFile(join(other, 'berth'), '#!/bin/sh\n');
    const refused = await exec(script, ['install'], { env: { BINDIR: other } });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('is not a Berth checkout');
    expect((await exec(script, ['uninstall'], { env: { BINDIR: other } })).code).toBe(1);
    expect(existsSync(join(other, 'berth'))).toBe(true);
  });

  it('gives a berth whose dev serves a project of its own outside the repository', async () => {
    dev = spawnTestChild(join(bindir, 'berth'), ['dev', '--port', '0'], { cwd: project, env: { ...process.env, LOG_LEVEL: 'warn' } });
    const [, url] = await dev.waitForOutput(/ready at (http:\/\/127\.0\.0\.1:\d+)/, { timeoutMs: 100_000 });
    const response = await fetch(`${url}/runs/wait`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ assistant_id: 'agent', input: { messages: [{ role: 'user', content: 'hi' }] } }),
    });
    expect(response.status).toBe(200);
    const state = (await response.json()) as { messages: { content: string }[] };
    expect(state.messages.at(-1)?.content).toBe('hello: hi');
    // Its state lives in the project's own .berth/.
    expect(existsSync(join(project, '.berth', 'postgres'))).toBe(true);

    const uninstalled = await exec(script, ['uninstall'], { env: { BINDIR: bindir } });
    expect(uninstalled.stdout).toContain(`removed ${bindir}/berth`);
    expect(existsSync(join(bindir, 'berth'))).toBe(false);
  }, 120_000);
});
