/**
 * `berth dev`: serve a LangGraph.js project on the embedded stack — a private Postgres under the
 * project's `.berth/` (state survives restarts), the agent server with API and workers in this
 * process — until Ctrl-C.
 */
import cluster from 'node:cluster';
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
  processes: string;
}

export async function dev(env: CliEnv, options: DevOptions, print: (line: string) => void): Promise<void> {
  const configPath = resolve(options.config);
  if (!existsSync(configPath)) throw new CliError(`no ${options.config} here: run berth dev in a LangGraph.js project or pass --config`);
  const stateDir = join(dirname(configPath), '.berth');
  const logger = createLogger({ name: 'agent-server', level: env.LOG_LEVEL });

  const processes = Number(options.processes);
  if (!Number.isInteger(processes) || processes < 1 || processes > 64) throw new CliError(`--processes must be 1-64, got ${options.processes}`);
  // A process forked by the one below: serve on the port and database it was given.
  if (cluster.isWorker) return serveForked(env, options, configPath, logger);

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
  let server: { url: string; close(): Promise<void> };
  try {
    server =
      processes > 1
        ? await startForked(processes, { DATABASE_URL: databaseUrl, BERTH_PORT: String(port) })
        : await startAgentServer(
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
  print(`Agent server ready at ${server.url}  (API docs: ${server.url}/docs)${processes > 1 ? `, ${processes} processes` : ''}`);
  print(`  state in ${stateDir}; stop with Ctrl-C`);
  print(`  try: new Client({ apiUrl: "${server.url}" }) from @langchain/langgraph-sdk`);
  await new Promise<void>((done) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => done());
  });
  await server.close();
  await postgres?.stop();
}

/**
 * `--processes N`: N processes serve one port (node:cluster hands connections out in turn), each
 * with its API and run workers, on the one database: throughput beyond one core.
 */
async function startForked(processes: number, env: Record<string, string>): Promise<{ url: string; close(): Promise<void> }> {
  const forked = Array.from({ length: processes }, () => cluster.fork(env));
  const stop = async () => {
    await Promise.all(
      forked.map((worker) =>
        worker.isDead() ? undefined : new Promise<void>((done) => {
          worker.once('exit', () => done());
          worker.process.kill('SIGTERM');
        }),
      ),
    );
  };
  try {
    const urls = await Promise.all(
      forked.map(
        (worker) =>
          new Promise<string>((resolve, reject) => {
            worker.on('message', (message: { ready?: string }) => message.ready && resolve(message.ready));
            worker.once('exit', (code) => reject(new CliError(`an agent server process exited (code ${code}) before it was ready`)));
          }),
      ),
    );
    return { url: urls[0]!, close: stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function serveForked(env: CliEnv, options: DevOptions, configPath: string, logger: ReturnType<typeof createLogger>): Promise<void> {
  if (!env.DATABASE_URL || env.BERTH_PORT === undefined) throw new CliError('a forked berth dev process needs DATABASE_URL and BERTH_PORT');
  const server = await startAgentServer(
    {
      configPath,
      databaseUrl: env.DATABASE_URL,
      host: options.host,
      port: env.BERTH_PORT,
      workers: Number(options.workers),
      ...(env.REDIS_URL ? { redisUrl: env.REDIS_URL } : {}),
    },
    logger,
  );
  process.send?.({ ready: server.url });
  await new Promise<void>((done) => {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => done());
  });
  await server.close();
}
