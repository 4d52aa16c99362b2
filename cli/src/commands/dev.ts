/**
 * `berth dev`: serve a LangGraph.js project on the embedded stack — a private Postgres under the
 * project's `.berth/` (state survives restarts), agent server processes with API and run workers —
 * until Ctrl-C. When a file the project runs changes (a module its graphs import, langgraph.json,
 * its env file: see dev/reloader.ts), new processes load the project on the same port and the old
 * ones finish their runs and requests, then exit (`--no-reload`: never).
 */
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import { startAgentServer } from '@berth/agent-runtime';
import { consoleDir } from '@berth/console';
import { devTracingProject } from '@berth/ids';
import { loadProjectConfig, loadProjectEnv } from '@berth/langgraph-project';
import { PostgresServer, portOrFree } from '@berth/local-stack';
import { createLogger } from '@berth/log';
import { CliError } from '../client.js';
import { Reloader, projectSources } from '../dev/reloader.js';
import { DevServers, type DrainRequest, type ServerReady } from '../dev/servers.js';
import { devTracing } from '../dev/tracing.js';
import { ProjectWatcher } from '../dev/watch.js';
import { DEV_WEBHOOK_EGRESS, devWebhookSecret } from '../dev/webhooks.js';
import type { CliEnv } from '../env.js';
import { STOP_SIGNALS } from '../signals.js';

export interface DevOptions {
  config: string;
  /** Checked by the flag's parser (flags.ts), as are the other numbers. */
  port: number;
  host: string;
  workers: number;
  processes: number;
  /** Reload on changes (`--no-reload` sets it false). */
  reload: boolean;
  /** Trace runs into the local platform (`--no-trace` sets it false). */
  trace: boolean;
}

/** Quiet time after the last change of a burst (a save, a git checkout) before reloading. */
const DEBOUNCE_MS = 200;
/**
 * How long replaced processes may take to finish their runs; a run still executing then is taken
 * over from its last checkpoint by the new processes once its lease lapses.
 */
const DRAIN_MS = 15_000;

export async function dev(env: CliEnv, options: DevOptions, print: (line: string) => void): Promise<void> {
  const configPath = resolve(options.config);
  if (!existsSync(configPath)) throw new CliError(`no ${options.config} here: run berth dev in a LangGraph.js project or pass --config`);
  const projectDir = dirname(configPath);
  const stateDir = join(projectDir, '.berth');

  // A process forked by the one below: serve on the port and database it was given.
  if (cluster.isWorker) return serveForked(env, options, configPath);

  // From here on, a signal (Ctrl-C, SIGTERM, SIGHUP; to this process or its group) stops what has
  // started so far, at whatever point of the start it comes: nothing is left running.
  let stopRequested = false;
  let onStop: (() => void) | undefined;
  let stopped!: (error?: CliError) => void;
  const stopping = new Promise<CliError | undefined>((done) => {
    stopped = (error) => {
      stopRequested = true;
      onStop?.();
      done(error);
    };
  });
  for (const signal of STOP_SIGNALS) process.on(signal, () => stopped());
  // Lines printed after the terminal hung up have nowhere to go: that is no reason to crash half-way.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE' && error.code !== 'EIO') throw error;
  });

  let postgres: PostgresServer | undefined;
  let servers: DevServers | undefined;
  let watcher: ProjectWatcher | undefined;
  try {
    const started = await startDev(env, options, { configPath, projectDir, stateDir }, print, {
      stopRequested: () => stopRequested,
      postgres: (server) => (postgres = server),
      servers: (created) => {
        servers = created;
        // At once (before the processes' exits are seen), so that a Ctrl-C, which they get too, is no crash.
        onStop = () => void created.stop();
      },
      failed: (error) => stopped(error),
    });
    if (started) watcher = started.watcher;
    const failure = await stopping;
    if (failure) throw failure;
  } finally {
    const stoppingServers = servers?.stop();
    watcher?.close();
    await stoppingServers;
    await postgres?.stop();
  }
}

interface DevPaths {
  configPath: string;
  projectDir: string;
  stateDir: string;
}

/** How the start reports what it started (for the stop), and learns of a stop asked for meanwhile. */
interface StartHooks {
  stopRequested(): boolean;
  postgres(server: PostgresServer): void;
  servers(servers: DevServers): void;
  /** The agent server failed for good (it exited, and does not reload). */
  failed(error: CliError): void;
}

/** Starts Postgres, the agent server processes and the watcher; undefined when a stop came first. */
async function startDev(
  env: CliEnv,
  options: DevOptions,
  { configPath, projectDir, stateDir }: DevPaths,
  print: (line: string) => void,
  hooks: StartHooks,
): Promise<{ watcher: ProjectWatcher | undefined } | undefined> {
  const { processes } = options;
  const requested = options.port;
  let databaseUrl = env.DATABASE_URL;
  if (!databaseUrl) {
    const postgres = new PostgresServer({ baseDir: join(stateDir, 'postgres') });
    hooks.postgres(postgres);
    databaseUrl = (await postgres.start()).connectionString;
  }
  if (hooks.stopRequested()) return undefined;
  // Runs are traced into the Berth platform found here, in a project of their own named after the
  // folder (`<folder> (dev)`): never the project of a deployment of that folder.
  const tracing = await devTracing(env, projectEnv(configPath), devTracingProject(basename(projectDir)), options.trace);
  const webhooks = await devWebhookSecret(stateDir);
  const port = await portOrFree(requested);
  if (hooks.stopRequested()) return undefined;
  if (requested && port !== requested) print(`port ${requested} is taken; using ${port}`);

  const servers = new DevServers({
    processes,
    env: { DATABASE_URL: databaseUrl, BERTH_PORT: String(port), BERTH_WEBHOOK_SECRET: webhooks.secret, ...tracing.env },
    drainMs: DRAIN_MS,
    onExit: (how, remaining) => {
      if (remaining > 0) print(`an agent server process exited (${how}); ${remaining} still serve`);
      else if (options.reload) print(`the agent server exited (${how}): save a file to start it again`);
      else hooks.failed(new CliError(`the agent server exited (${how})`));
    },
  });
  hooks.servers(servers);
  let url: string;
  try {
    url = await servers.start();
  } catch (error) {
    // Stopped while its processes started: they are, and so is the rest (by the caller).
    if (hooks.stopRequested()) return undefined;
    throw error;
  }
  print(`Agent server ready at ${url}  (API docs: ${url}/docs)${processes > 1 ? `, ${processes} processes` : ''}`);
  print(`  Studio: ${url}/studio`);
  print(`  state in ${stateDir}; stop with Ctrl-C`);
  print(`  ${tracing.note}`);
  print(`  run webhooks are signed with the secret in ${webhooks.file}; receivers on this machine (loopback) are allowed`);
  print(`  try: new Client({ apiUrl: "${url}" }) from @langchain/langgraph-sdk`);

  if (!options.reload) {
    print('  does not reload (--no-reload): it serves the code as it was at start');
    return { watcher: undefined };
  }
  const reloader = new Reloader(servers, configPath, url, print);
  const watcher = new ProjectWatcher(projectDir, {
    debounceMs: DEBOUNCE_MS,
    matters: (path, kind) => reloader.matters(path, kind),
    onChange: (paths) => reloader.reload(paths),
    onError: (error) => print(`not watching part of the project: ${error.message}`),
  });
  await watcher.start();
  await reloader.readConfig();
  print('  reloads when the project changes (--no-reload: never)');
  return { watcher };
}

/** One agent server process (forked by `dev`): serves until a signal, or until asked to drain. */
async function serveForked(env: CliEnv, options: DevOptions, configPath: string): Promise<void> {
  if (!env.DATABASE_URL || env.BERTH_PORT === undefined) throw new CliError('a forked berth dev process needs DATABASE_URL and BERTH_PORT');
  // What the project runs: the primary reloads when one of these changes.
  const sources = projectSources(dirname(configPath));
  const logger = createLogger({ name: 'agent-server', level: env.LOG_LEVEL });
  const server = await startAgentServer(
    {
      configPath,
      databaseUrl: env.DATABASE_URL,
      host: options.host,
      port: env.BERTH_PORT,
      workers: options.workers,
      // The console's Studio, on this server's own origin (a deployed one never serves it).
      studioDir: consoleDir,
      ...(env.REDIS_URL ? { redisUrl: env.REDIS_URL } : {}),
      // As a deployed agent server reads it; over the project env file's, as every shell variable is.
      ...(env.LANGGRAPH_CONFIG ? { langgraphConfig: env.LANGGRAPH_CONFIG } : {}),
      ...(env.BERTH_TRACING_ENDPOINT && env.BERTH_TRACING_API_KEY && env.BERTH_TRACING_PROJECT
        ? { tracing: { endpoint: env.BERTH_TRACING_ENDPOINT, apiKey: env.BERTH_TRACING_API_KEY, project: env.BERTH_TRACING_PROJECT } }
        : {}),
      ...(env.BERTH_WEBHOOK_SECRET ? { webhooks: { secret: env.BERTH_WEBHOOK_SECRET, privateEgress: DEV_WEBHOOK_EGRESS } } : {}),
    },
    logger,
  );
  process.send?.({ ready: server.url, sources: [...sources.take()] } satisfies ServerReady);
  const close = await new Promise<{ drainMs?: number }>((done) => {
    for (const signal of STOP_SIGNALS) process.once(signal, () => done({}));
    process.on('message', (message: Partial<DrainRequest>) => typeof message?.drain === 'number' && done({ drainMs: message.drain }));
  });
  await server.close(close);
}

/** The project's env file, if it loads (a broken project is reported by the processes that load it). */
function projectEnv(configPath: string): Record<string, string> {
  try {
    return loadProjectEnv(loadProjectConfig(configPath), { missingFileOk: true });
  } catch {
    return {};
  }
}
