/**
 * This platform's id, kept in the `settings` table: made by the first manager that starts on the
 * database, the same for every manager after. Instances carry it (INSTANCE_LABELS.platform), so that
 * the reconciler of one platform never touches another's on a shared engine.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from '@berth/db';
import type { SandboxTables } from '../tables.js';

const KEY = 'platform_id';

export async function loadPlatformId(db: Kysely<SandboxTables>): Promise<string> {
  // Two managers starting at once: the first insert wins and both read it.
  await db
    .insertInto('settings')
    .values({ key: KEY, value: randomUUID() })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  return (await db.selectFrom('settings').select('value').where('key', '=', KEY).executeTakeFirstOrThrow()).value;
}
