/**
 * `berth keys bootstrap`: mints an admin key of the system tenant straight in the platform's
 * database (DATABASE_URL), creating the tenant on first use — how an operator gets the first key
 * of a platform nobody can call yet (in a cluster: `kubectl exec` into the gateway, whose pod has
 * DATABASE_URL). `berth up` mints its key the same way.
 */
import { AuthStore, type AuthTables } from '@berth/auth';
import { createDatabase } from '@berth/db';
import { migrateGateway } from '@berth/gateway';
import { CliError } from '../client.js';
import type { CliEnv } from '../env.js';

export interface BootstrapKey {
  tenant_id: string;
  api_key: string;
}

/** A new admin key of the system tenant in the database at `databaseUrl`. */
export async function mintBootstrapKey(databaseUrl: string): Promise<BootstrapKey> {
  const database = createDatabase<AuthTables>({ connectionString: databaseUrl, schema: 'gateway', max: 1 });
  try {
    const { tenant, key } = await new AuthStore(database.db).bootstrap();
    return { tenant_id: tenant.id, api_key: key };
  } finally {
    await database.close();
  }
}

export async function keysBootstrap(env: CliEnv, flags: { json?: boolean }, print: (line: string) => void): Promise<BootstrapKey> {
  if (!env.DATABASE_URL) throw new CliError('keys bootstrap needs DATABASE_URL (the platform database; in a cluster, run it in the gateway pod)');
  // The gateway's tables may not exist yet (no gateway started): migrating is idempotent and locked.
  await migrateGateway(env.DATABASE_URL);
  const minted = await mintBootstrapKey(env.DATABASE_URL);
  print(flags.json ? JSON.stringify(minted) : minted.api_key);
  return minted;
}
