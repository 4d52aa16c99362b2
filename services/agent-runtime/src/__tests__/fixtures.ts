/**
 * Shared pieces of the agent server's SDK tests: the test project, message helpers, polling.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { silentLogger } from '@berth/log';
import { startAgentServer, type AgentServerConfig, type RunningAgentServer } from '../server.js';

/** The project with every fixture graph (echo, slow, interrupt, subgraph, builder, factory). */
export const serverProject = fileURLToPath(new URL('../../test-projects/server/langgraph.json', import.meta.url));

export type Msg = { type: string; content: string };
export const human = (content: string) => ({ messages: [{ role: 'user', content }] });
export const lastText = (values: unknown) => (values as { messages: Msg[] }).messages.at(-1)?.content ?? '';
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every 20 ms until `ok` or the timeout; returns the last value either way. */
export async function until<T>(probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (ok(value) || Date.now() > deadline) return value;
    await sleep(20);
  }
}

/** An agent server on the test project with short leases, on 127.0.0.1 and a free port. */
export function startTestServer(databaseUrl: string, overrides: Partial<AgentServerConfig> = {}): Promise<RunningAgentServer> {
  return startAgentServer(
    { configPath: serverProject, databaseUrl, host: '127.0.0.1', port: 0, workers: 4, leaseMs: 1000, ...overrides },
    silentLogger(),
  );
}

const workerScript = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

/** An agent server on the test project in a child process (API + `workers` run slots); resolves once it serves. */
export async function spawnAgentServer(
  databaseUrl: string,
  options: { workers?: number; config?: Partial<AgentServerConfig> } = {},
): Promise<{ child: ChildProcess; url: string }> {
  const args = ['--conditions=berth-source', '--import', 'tsx', workerScript, serverProject, databaseUrl, String(options.workers ?? 2), JSON.stringify(options.config ?? {})];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d) => {
      out += String(d);
      const match = /ready (\S+)/.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`agent server process exited ${code}`)));
  });
  return { child, url };
}
