/**
 * Where `berth dev` traces its runs: into the Berth platform the connection resolver finds (the one
 * `berth up` started, or BERTH_HOST_URL with BERTH_API_KEY), in a tracing project of its own (`<folder> (dev)`, never a
 * deployment's) — unless `--no-trace`, or the developer set LANGSMITH_TRACING / LANGSMITH_ENDPOINT
 * (in the shell or the project's env file): then their own setting applies and Berth adds nothing.
 */
import { CliError } from '../client.js';
import { gatewayClient } from '../connection.js';
import type { CliEnv } from '../env.js';

export interface DevTracing {
  /** Environment of the agent server processes (BERTH_TRACING_*); empty when Berth does not trace. */
  env: Record<string, string>;
  /** One line saying where traces go. */
  note: string;
}

const OWN_SETTINGS = ['LANGSMITH_TRACING', 'LANGSMITH_ENDPOINT', 'LANGCHAIN_TRACING_V2', 'LANGCHAIN_ENDPOINT'] as const;

export async function devTracing(env: CliEnv, projectEnv: Record<string, string>, project: string, enabled: boolean): Promise<DevTracing> {
  const own = OWN_SETTINGS.filter((name) => (env[name] ?? projectEnv[name]) !== undefined);
  if (own.length) {
    const endpoint = env.LANGSMITH_ENDPOINT ?? projectEnv.LANGSMITH_ENDPOINT ?? env.LANGCHAIN_ENDPOINT ?? projectEnv.LANGCHAIN_ENDPOINT;
    return { env: {}, note: `traces: as your ${own.join(', ')} say (${endpoint ?? 'LangSmith'}); Berth adds none` };
  }
  if (!enabled) return { env: {}, note: 'traces: off (--no-trace)' };
  let client;
  try {
    client = await gatewayClient(env, {});
  } catch (error) {
    if (error instanceof CliError) return { env: {}, note: `traces: off — no Berth platform to trace into (${error.message})` };
    throw error;
  }
  const apiKey = client.apiKey;
  if (!apiKey) return { env: {}, note: `traces: off — tracing into ${client.url} needs an API key (BERTH_API_KEY); a berth login token is not one` };
  try {
    await client.request('GET', '/v1/me');
  } catch (error) {
    if (error instanceof CliError) return { env: {}, note: `traces: off — ${client.url} did not take the API key (${error.message})` };
    throw error;
  }
  return {
    env: { BERTH_TRACING_ENDPOINT: client.url, BERTH_TRACING_API_KEY: apiKey, BERTH_TRACING_PROJECT: project },
    note: `traces: ${client.url}, project ${project} (--no-trace: off)`,
  };
}
