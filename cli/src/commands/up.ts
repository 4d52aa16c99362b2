/**
 * `berth up`: provision Postgres under the state folder (unless DATABASE_URL is given), apply
 * migrations, start the platform as a detached process, wait until it is ready, and print the
 * URL, tenant id and bootstrap API key (also written to credentials.json).
 */
import { spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { AuthStore, type AuthTables } from '@berth/auth';
import { createDatabase } from '@berth/db';
import { detectLocalIsolation } from '@berth/control-plane';
import { migrateGateway } from '@berth/gateway';
import { PostgresServer, portOrFree, sleep } from '@berth/local-stack';
import { CliError } from '../client.js';
import { childEnv, type CliEnv } from '../env.js';
import { StateDir, isAlive, type Credentials } from '../state.js';

export interface UpResult {
  url: string;
  credentials: Credentials;
  pid: number;
  databaseUrl: string;
  alreadyRunning: boolean;
}

const DEFAULT_PORT = 8080;

export async function up(env: CliEnv, print: (line: string) => void = console.log): Promise<UpResult> {
  const state = new StateDir(env.stateDir);
  await state.ensure();

  let databaseUrl = env.DATABASE_URL;
  if (!databaseUrl) {
    const postgres = new PostgresServer({ baseDir: state.postgresDir });
    const pg = await postgres.start();
    databaseUrl = pg.connectionString;
    print(`postgres ${pg.binaries.major} (${pg.binaries.source}) on 127.0.0.1:${pg.port}, data in ${postgres.dataDir}`);
  }
  await migrateGateway(databaseUrl);

  let platform = await state.readPlatform();
  const alreadyRunning = platform !== undefined && isAlive(platform.pid) && (await isReady(platform.url));
  if (!alreadyRunning) {
    const port = await portOrFree(env.BERTH_PORT ?? platform?.port ?? DEFAULT_PORT);
    const url = `http://${env.BERTH_HOST}:${port}`;
    const log = openSync(state.logFile, 'a');
    const child = spawn(process.execPath, [fileURLToPath(new URL('../bin.js', import.meta.url)), 'serve'], {
      detached: true,
      stdio: ['ignore', log, log],
      env: childEnv({
        DATABASE_URL: databaseUrl,
        BERTH_PORT: String(port),
        BERTH_HOST: env.BERTH_HOST,
        BERTH_STATE_DIR: env.stateDir,
        LOG_LEVEL: env.LOG_LEVEL,
        ...(env.BERTH_PUBLIC_URL ? { BERTH_PUBLIC_URL: env.BERTH_PUBLIC_URL } : {}),
      }),
    });
    child.unref();
    platform = { pid: child.pid!, port, url, started_at: new Date().toISOString() };
    await state.writePlatform(platform);
    await waitReady(url, child.pid!, state.logFile);
  }

  const credentials = await ensureCredentials(state, platform!.url, databaseUrl);
  print('');
  print(alreadyRunning ? 'Berth is already running.' : 'Berth is up.');
  print(`  gateway    ${platform!.url}   (API docs: ${platform!.url}/docs)`);
  if (env.BERTH_PUBLIC_URL) print(`  public URL ${env.BERTH_PUBLIC_URL}   (BERTH_PUBLIC_URL: links the gateway hands out)`);
  print(`  tenant id  ${credentials.tenant_id}`);
  print(`  api key    ${credentials.api_key}`);
  print(`  saved in   ${state.credentialsFile}`);
  print(`  queues     ${env.REDIS_URL ? 'redis (REDIS_URL)' : 'postgres (embedded; set REDIS_URL for Redis)'}`);
  print(`  logs       ${state.logFile}`);
  const isolation = await detectLocalIsolation(env.stateDir);
  print(`  isolation  ${isolation.kind === 'os-user' ? 'each deployment runs as an OS user of its own' : `NONE: ${isolation.reason}`}`);
  print('');
  print('Try:');
  print(`  curl -H "X-Api-Key: ${credentials.api_key}" ${platform!.url}/v1/me`);
  print('Stop with `make down` (data stays in the state folder).');
  return { url: platform!.url, credentials, pid: platform!.pid, databaseUrl, alreadyRunning };
}

async function isReady(url: string): Promise<boolean> {
  try {
    return (await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(3000) })).ok;
  } catch {
    return false;
  }
}

async function waitReady(url: string, pid: number, logFile: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await isReady(url))) {
    if (!isAlive(pid)) throw new CliError(`the platform process exited during start; see ${logFile}`);
    if (Date.now() > deadline) throw new CliError(`the platform did not become ready within ${timeoutMs / 1000} s; see ${logFile}`);
    await sleep(200);
  }
}

/** Reuses stored credentials while they still work, else mints a new bootstrap admin key. */
async function ensureCredentials(state: StateDir, url: string, databaseUrl: string): Promise<Credentials> {
  const stored = await state.readCredentials();
  if (stored && (await keyWorks(url, stored))) {
    if (stored.gateway_url !== url) await state.writeCredentials({ ...stored, gateway_url: url });
    return { ...stored, gateway_url: url };
  }
  const database = createDatabase<AuthTables>({ connectionString: databaseUrl, schema: 'gateway', max: 1 });
  try {
    const { tenant, key } = await new AuthStore(database.db).bootstrap();
    const credentials = { gateway_url: url, tenant_id: tenant.id, api_key: key };
    await state.writeCredentials(credentials);
    return credentials;
  } finally {
    await database.close();
  }
}

async function keyWorks(url: string, credentials: Credentials): Promise<boolean> {
  try {
    const res = await fetch(`${url}/v1/me`, { headers: { 'x-api-key': credentials.api_key, 'x-tenant-id': credentials.tenant_id } });
    return res.ok;
  } catch {
    return false;
  }
}
