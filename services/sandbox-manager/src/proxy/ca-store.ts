/**
 * The platform's sandbox proxy CA, kept in the `settings` table (its key sealed with the platform
 * key): made once, on the first start of any manager, and the same for every manager after, so
 * that sandboxes keep trusting the proxy across restarts and replicas.
 */
import type { Kysely } from '@berth/db';
import type { SecretBox } from '@berth/secret-box';
import type { SandboxTables } from '../tables.js';
import { ProxyCa } from './proxy-ca.js';

const KEY = 'proxy_ca';

interface StoredCa {
  cert_pem: string;
  /** The private key PEM, sealed (base64). */
  key_sealed: string;
}

export async function loadProxyCa(db: Kysely<SandboxTables>, box: SecretBox): Promise<ProxyCa> {
  const stored = await read(db);
  if (stored) return ProxyCa.fromPem({ certPem: stored.cert_pem, keyPem: box.open(Buffer.from(stored.key_sealed, 'base64')) });
  const made = await ProxyCa.generate();
  const value: StoredCa = { cert_pem: made.certPem, key_sealed: box.seal(made.keyPem).toString('base64') };
  // Two managers starting at once: the first insert wins and both use its CA.
  await db
    .insertInto('settings')
    .values({ key: KEY, value: JSON.stringify(value) })
    .onConflict((oc) => oc.column('key').doNothing())
    .execute();
  const winner = await read(db);
  if (!winner) throw new Error('the sandbox proxy CA was stored but cannot be read back');
  return winner.cert_pem === made.certPem ? made : ProxyCa.fromPem({ certPem: winner.cert_pem, keyPem: box.open(Buffer.from(winner.key_sealed, 'base64')) });
}

async function read(db: Kysely<SandboxTables>): Promise<StoredCa | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', KEY).executeTakeFirst();
  return row ? (JSON.parse(row.value) as StoredCa) : undefined;
}
