/**
 * `berth restore <archive>`: a `berth backup` into a fresh state folder (a new Postgres cluster
 * under it, or the empty database DATABASE_URL names). Every table must hold the rows it held in
 * the backup's snapshot, else the restore fails and says which. `berth up` then brings the
 * deployments back at their URLs.
 */
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { CommandError, run } from '@berth/local-stack';
import { ROLES, keyFingerprint, readManifest } from '../backup/archive.js';
import { BerthPostgres, rowDifferences } from '../backup/postgres.js';
import { CliError } from '../client.js';
import type { CliEnv } from '../env.js';
import { StateDir, supervisorAlive } from '../state.js';
import { openPostgres, seconds } from './backup.js';

export async function restore(env: CliEnv, archive: string, print: (line: string) => void = console.log): Promise<void> {
  const file = resolve(archive);
  if (!existsSync(file)) throw new CliError(`${file} does not exist`);
  const state = new StateDir(env.stateDir);
  const record = await state.readSupervisor();
  if (record && supervisorAlive(record))
    throw new CliError(`Berth runs from ${state.root}: restore into a fresh state folder (BERTH_STATE_DIR), or \`make down\` and move this one away`);
  const taken = ['secret-key', ...(env.DATABASE_URL ? [] : ['postgres'])].filter((f) => existsSync(join(state.root, f)));
  if (taken.length)
    throw new CliError(
      `${state.root} already holds an installation (${taken.join(', ')}): restore into a fresh state folder (BERTH_STATE_DIR), or move this one away`,
    );

  await state.ensure();
  const work = await mkdtemp(join(state.root, '.restore-'));
  try {
    await run('tar', ['-xzf', file, '-C', work], { timeoutMs: 6 * 60 * 60 * 1000 }).catch((error: Error) => {
      throw new CliError(`${file} is not a Berth backup: ${error instanceof CommandError ? error.stderr.trim() : error.message}`, { cause: error });
    });
    const manifest = await readManifest(work, file);
    const key = await readFile(join(work, 'secret-key'), 'utf8').catch(() => '');
    if (keyFingerprint(key) !== manifest.secret_key_sha256) throw new CliError(`${file} holds no secret key, or not the one its databases were sealed with`);
    print(`restoring a backup of ${manifest.created_at} (berth ${manifest.berth_version}) into ${state.root}`);

    const postgres = await openPostgres(env, state, print);
    try {
      const db = await BerthPostgres.open(postgres.url);
      const agents = manifest.databases.filter((d) => d.kind === 'agent');
      const conflicts = await db.conflicts(agents.map((d) => d.name));
      if (conflicts.length) throw new CliError(`cannot restore into ${db.platformDatabase}: ${conflicts.join('; ')}`);
      await db.applySql(await readFile(join(work, ROLES), 'utf8'));
      // The platform's database first: it says which deployments the others belong to.
      for (const dumped of [...manifest.databases].sort((a, b) => (a.kind === 'platform' ? -1 : b.kind === 'platform' ? 1 : 0))) {
        const started = Date.now();
        const found = await db.restore(dumped, join(work, dumped.file));
        const differences = rowDifferences(dumped.rows, found);
        if (differences.length) throw new CliError(`${dumped.name} was not restored whole: ${differences.slice(0, 10).join('; ')}`);
        const rows = Object.values(found).reduce((a, b) => a + b, 0);
        print(`restored ${dumped.kind === 'platform' ? 'the platform database' : dumped.name} (${rows} rows, as backed up) in ${seconds(started)}`);
      }
    } finally {
      await postgres.release();
    }

    for (const name of manifest.state_files) await rename(join(work, name), join(state.root, name));
    await chmod(join(state.root, 'secret-key'), 0o600);
    print(`restored ${manifest.state_files.join(', ')}`);
    print(`Restored. Start it with \`make up\`${env.DATABASE_URL ? ' (with the same DATABASE_URL)' : ''}: the deployments come back at their URLs.`);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}
