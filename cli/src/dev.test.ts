/**
 * `berth dev` through the built binary, on a copy of the echo test project.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { cp, mkdtemp, readFile, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('../dist/bin.js', import.meta.url));
const repo = fileURLToPath(new URL('../..', import.meta.url));
let project: string;
let dev: ChildProcess | undefined;

beforeAll(async () => {
  project = await mkdtemp(join(tmpdir(), 'berth-dev-'));
  await cp(join(repo, 'services/agent-runtime/test-projects/echo'), project, { recursive: true });
  await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'echo', type: 'module' }));
  await symlink(join(repo, 'node_modules'), join(project, 'node_modules'));
});
afterAll(async () => {
  if (dev && dev.exitCode === null && dev.signalCode === null) {
    const exited = new Promise((resolve) => dev!.once('exit', resolve));
    dev.kill('SIGTERM');
    await exited;
  }
  // As root the cluster may live outside the (private) temp folder, linked from .berth/postgres.
  const cluster = await realpath(join(project, '.berth', 'postgres')).catch(() => undefined);
  if (cluster && !cluster.startsWith(project)) await rm(cluster, { recursive: true, force: true });
  await rm(project, { recursive: true, force: true });
});

/** Starts `berth dev` in the project; resolves with the URL that `ready` (the first group) prints. */
function startDev(args: string[], ready: RegExp): Promise<string> {
  const child = spawn(process.execPath, [bin, 'dev', '--port', '0', ...args], { cwd: project, env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
  dev = child;
  return new Promise<string>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stderr!.on('data', (d) => (err += String(d)));
    child.stdout!.on('data', (d) => {
      out += String(d);
      const match = ready.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code, signal) => reject(new Error(`berth dev exited (code ${code}, signal ${signal}): ${out}\n${err}`)));
  });
}

describe('berth dev', () => {
  it('serves the project on a durable local Postgres until stopped', async () => {
    const url = await startDev([], /ready at (http:\/\/127\.0\.0\.1:\d+)/);
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
    const exited = new Promise<number | null>((resolve) => dev!.once('exit', resolve));
    dev!.kill('SIGTERM');
    expect(await exited).toBe(0);
  }, 60_000);

  it('serves one port from several processes with --processes, and stops them all', async () => {
    const url = await startDev(['--processes', '2'], /ready at (http:\/\/127\.0\.0\.1:\d+).*, 2 processes/);
    // Runs of one thread, sent to whichever process accepts them, all complete (one database, one queue).
    const thread = (await (await fetch(`${url}/threads`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()) as { thread_id: string };
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
    const pids = (await new Promise<string>((resolve) => execFile('pgrep', ['-P', String(dev!.pid)], (_e, out) => resolve(out)))).trim().split('\n').filter(Boolean);
    expect(pids.length).toBeGreaterThanOrEqual(2);
    const exited = new Promise<number | null>((resolve) => dev!.once('exit', resolve));
    dev!.kill('SIGTERM');
    expect(await exited).toBe(0);
    for (const pid of pids) expect(() => process.kill(Number(pid), 0)).toThrow();
  }, 60_000);

  it('explains a missing langgraph.json', async () => {
    const res = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, [bin, 'dev', '--config', 'nope.json'], { cwd: project }, (error, _o, stderr) => resolve({ code: error ? 1 : 0, stderr })),
    );
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no nope.json here');
  });
});
