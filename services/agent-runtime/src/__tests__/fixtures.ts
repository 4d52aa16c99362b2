/**
 * Shared pieces of the agent server's SDK tests: the test project, message helpers, polling.
 */
import { fileURLToPath } from 'node:url';
import { silentLogger } from '@berth/log';
import { spawnTestChild, until as waitUntil, type TestChild } from '@berth/testing';
import { startAgentServer, type AgentServerConfig, type RunningAgentServer } from '../server.js';

/** The project with every fixture graph (echo, slow, interrupt, subgraph, builder, factory). */
export const serverProject = fileURLToPath(new URL('../../test-projects/server/langgraph.json', import.meta.url));
/** The `emit` and `steps` graphs (graph outputs, and executions counted outside Postgres). */
export const durabilityProject = fileURLToPath(new URL('../../test-projects/durability/langgraph.json', import.meta.url));

export type Msg = { type: string; content: string };
export const human = (content: string) => ({ messages: [{ role: 'user', content }] });
export const lastText = (values: unknown) => (values as { messages: Msg[] }).messages.at(-1)?.content ?? '';

/**
 * `until` of @berth/testing for a probe and a condition on its value: polls every 20 ms and
 * returns the value once `ok` holds; throws UntilTimeoutError naming the condition otherwise.
 */
export async function until<T>(probe: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const met = await waitUntil(
    `${ok.toString()} to hold`,
    async () => {
      const value = await probe();
      return ok(value) ? { value } : undefined;
    },
    timeoutMs,
    20,
  );
  return met.value;
}

/** An agent server on the test project with short leases, on 127.0.0.1 and a free port. */
export function startTestServer(databaseUrl: string, overrides: Partial<AgentServerConfig> = {}): Promise<RunningAgentServer> {
  return startAgentServer({ configPath: serverProject, databaseUrl, host: '127.0.0.1', port: 0, workers: 4, leaseMs: 1000, ...overrides }, silentLogger());
}

const workerScript = fileURLToPath(new URL('./worker-process.ts', import.meta.url));

/**
 * An agent server on the test project in a child process (API + `workers` run slots); resolves once it
 * serves. Its stderr goes to the test's, so a crash after it started shows in the test log; with
 * `logLevel` its log lines are in its output().
 */
export async function spawnAgentServer(
  databaseUrl: string,
  options: { workers?: number; configPath?: string; config?: Partial<AgentServerConfig>; logLevel?: 'info' | 'warn' } = {},
): Promise<TestChild & { url: string }> {
  const args = [
    '--conditions=berth-source',
    '--import',
    'tsx',
    workerScript,
    options.configPath ?? serverProject,
    databaseUrl,
    String(options.workers ?? 2),
    JSON.stringify(options.config ?? {}),
  ];
  if (options.logLevel) args.push(options.logLevel);
  const started = spawnTestChild(process.execPath, args, { env: process.env, stderr: 'inherit' });
  try {
    const [, url] = await started.waitForOutput(/ready (\S+)/);
    return { ...started, url: url! };
  } catch (error) {
    // The caller never gets it to stop.
    await started.stop();
    throw error;
  }
}
