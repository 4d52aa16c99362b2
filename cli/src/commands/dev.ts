/**
 * `berth dev`: serve a LangGraph.js project on the embedded stack — a private Postgres under the
 * project's `.berth/` (state survives restarts), the agent server with API and workers in this
 * process — until Ctrl-C.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { startAgentServer } from '@berth/agent-runtime';
import { PostgresServer, portOrFree } from '@berth/local-stack';
import { createLogger } from '@berth/log';
import { CliError } from '../client.js';
import type { CliEnv } from '../env.js';

export interface DevOptions {
  config: string;
  port: string;
  host: string;
  workers: string;
}

export async function dev(env: CliEnv, options: DevOptions, print: (line: string) => void): Promise<void> {
  const configPath = resolve(options.config);
  if (!existsSync(configPath)) throw new CliError(`no ${options.config} here: run berth dev in a LangGraph.js project or pass --config`);
  const stateDir = join(dirname(configPath), '.berth');
  const logger = createLogger({ name: 'agent-server', level: env.LOG_LEVEL });

  let databaseUrl = env.DATABASE_URL;
  let postgres: PostgresServer | undefined;
  if (!databaseUrl) {
    postgres = new PostgresServer({ baseDir: join(stateDir, 'postgres') });
    databaseUrl = (await postgres.start()).connectionString;
  }
  const requested = Number(options.port);
  if (!Number.isInteger(requested) || requested < 0 || requested > 65535) throw new CliError(`--port must be a port number, got ${options.port}`);
  const port = await portOrFree(requested);
  if (requested && port !== requested) print(`port ${requested} is taken; using ${port}`);
  let server;
  try {
    server = await startAgentServer(
      {
        configPath,
        databaseUrl,
        host: options.host,
        port,
        workers: Number(options.workers),
        ...(env.REDIS_URL ? { redisUrl: env.REDIS_URL } : {}),
      },
      logger,
    );
  } catch (error) {
    // A project that does not load must not leave its Postgres running.
    await postgres?.stop();
    throw error;
  }
  print(`Agent server ready at ${server.url}  (API docs: ${server.url}/docs)`);
  print(`  state in ${stateDir}; stop with Ctrl-C`);
  print(`  try: new Client({ apiUrl: "${server.url}" }) from @langchain/langgraph-sdk`);
  await new Promise<void>((done) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => done());
  });
  await server.close();
  await postgres?.stop();
}
