import { AuthStore, type AuthTables } from '@berth/auth';
import { createDatabase } from '@berth/db';

/** A bootstrap tenant's admin API key on the platform database at `databaseUrl` (as `berth up` makes). */
export async function bootstrapKey(databaseUrl: string): Promise<string> {
  const database = createDatabase<AuthTables>({ connectionString: databaseUrl, schema: 'gateway', max: 1 });
  try {
    return (await new AuthStore(database.db).bootstrap()).key;
  } finally {
    await database.close();
  }
}
