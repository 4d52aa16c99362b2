/**
 * `berth backup`: one archive of everything a `make up` installation needs to come back — the
 * platform's database and every deployment's agent database (each dumped in one snapshot, with its
 * tables' row counts from that snapshot), the deployments' database roles, the secret key that
 * opens what the database keeps sealed, the bootstrap credentials and the built revisions. The
 * platform may keep running; Postgres is started for the backup (and stopped again) when it is not.
 * Sandboxes' files are not included.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { PostgresServer, run } from '@berth/local-stack';
import { DUMPS, MANIFEST, ROLES, STATE_FILES, keyFingerprint, type Manifest } from '../backup/archive.js';
import { BerthPostgres, type DumpedDatabase } from '../backup/postgres.js';
import { CliError } from '../client.js';
import { localPlatform } from '../connection.js';
import type { CliEnv } from '../env.js';
import { BERTH_VERSION } from '../version.js';
import type { StateDir } from '../state.js';

export interface BackupFlags {
  /** @default berth-backup-<UTC time>.tar.gz in the working folder */
  output?: string;
}

export async function backup(env: CliEnv, flags: BackupFlags, print: (line: string) => void = console.log): Promise<string> {
  const state = await localPlatform(env);
  const key = await readFile(join(state.root, 'secret-key'), 'utf8').catch((error: Error) => {
    throw new CliError(`no Berth installation in ${state.root} (no secret-key): run it where \`make up\` ran, or set BERTH_STATE_DIR`, { cause: error });
  });
  const output = resolve(flags.output ?? `berth-backup-${new Date().toISOString().replace(/[:.]/g, '-')}.tar.gz`);
  if (existsSync(output)) throw new CliError(`${output} exists: choose another --output`);
  await mkdir(dirname(output), { recursive: true });
  const work = await mkdtemp(join(dirname(output), '.berth-backup-'));
  const postgres = await openPostgres(env, state, print);
  try {
    const db = await BerthPostgres.open(postgres.url);
    const databases = await db.databases();
    await mkdir(join(work, DUMPS));
    const dumped: DumpedDatabase[] = [];
    for (const { name, kind } of databases) {
      const started = Date.now();
      const file = `${DUMPS}/${name}.dump`;
      const rows = await db.dump(name, join(work, file));
      dumped.push({ name, kind, file, rows });
      const total = Object.values(rows).reduce((a, b) => a + b, 0);
      const size = (await stat(join(work, file))).size;
      print(`dumped ${kind === 'platform' ? `the platform database ${name}` : name} (${total} rows, ${mib(size)}) in ${seconds(started)}`);
    }
    await writeFile(join(work, ROLES), await db.rolesSql(dumped.filter((d) => d.kind === 'agent').map((d) => d.name)));
    const stateFiles = STATE_FILES.filter((f) => existsSync(join(state.root, f)));
    const manifest: Manifest = {
      format: 'berth-backup',
      version: 1,
      berth_version: BERTH_VERSION,
      created_at: new Date().toISOString(),
      source: env.DATABASE_URL ? 'DATABASE_URL' : 'embedded',
      secret_key_sha256: keyFingerprint(key),
      databases: dumped,
      state_files: stateFiles,
    };
    await writeFile(join(work, MANIFEST), JSON.stringify(manifest, null, 2) + '\n');
    // The archive holds the secret key: only its owner may read it, from the first byte on.
    await writeFile(output, '', { mode: 0o600 });
    await run('tar', ['-czf', output, '-C', work, MANIFEST, ROLES, DUMPS, '-C', state.root, ...stateFiles], { timeoutMs: 6 * 60 * 60 * 1000 });
    await chmod(output, 0o600);
    print(
      `wrote ${output} (${mib((await stat(output)).size)}): ${dumped.length - 1} deployment database(s), the secret key, ${stateFiles.filter((f) => f !== 'secret-key').join(', ')}`,
    );
    print('It holds the secret key that opens deployment secrets and export credentials: keep it as safe as the data.');
    return output;
  } catch (error) {
    await rm(output, { force: true });
    throw error;
  } finally {
    await rm(work, { recursive: true, force: true });
    await postgres.release();
  }
}

/** The platform's Postgres: DATABASE_URL's, or the state folder's cluster (started for the backup when it is stopped). */
export async function openPostgres(env: CliEnv, state: StateDir, print: (line: string) => void): Promise<{ url: string; release(): Promise<void> }> {
  if (env.DATABASE_URL) return { url: env.DATABASE_URL, release: async () => {} };
  const server = new PostgresServer({ baseDir: state.postgresDir });
  const running = (await server.pid()) !== undefined;
  const { connectionString } = await server.start();
  if (!running) print(`started Postgres in ${state.postgresDir} (Berth is stopped)`);
  return {
    url: connectionString,
    release: async () => {
      if (running) return;
      await server.stop();
      print('stopped Postgres again');
    },
  };
}

export const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
export const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;
