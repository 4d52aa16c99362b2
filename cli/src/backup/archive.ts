/**
 * A Berth backup: one gzipped tar holding `manifest.json`, `roles.sql`, a dump per database under
 * `db/`, and the state folder's files a platform cannot do without (the key that opens what the
 * database keeps sealed, the bootstrap credentials, the gateway's port, the built revisions).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { CliError } from '../client.js';

export const MANIFEST = 'manifest.json';
export const ROLES = 'roles.sql';
export const DUMPS = 'db';

/** Files and folders of the state folder a backup carries, when present; `secret-key` always. */
export const STATE_FILES = ['secret-key', 'credentials.json', 'gateway-port', 'artifacts'] as const;

const Manifest = z.strictObject({
  format: z.literal('berth-backup'),
  version: z.literal(1),
  berth_version: z.string(),
  created_at: z.string(),
  /** Where the platform's database was: its own Postgres under the state folder, or DATABASE_URL's. */
  source: z.enum(['embedded', 'DATABASE_URL']),
  /** The first 16 hex digits of the secret key's SHA-256: tells the key that belongs to these dumps. */
  secret_key_sha256: z.string().regex(/^[0-9a-f]{16}$/),
  databases: z.array(
    z.strictObject({
      name: z.string(),
      kind: z.enum(['platform', 'agent']),
      file: z.string().regex(/^db\/[A-Za-z0-9_.-]+\.dump$/),
      rows: z.record(z.string(), z.number().int().nonnegative()),
    }),
  ),
  /** Which of STATE_FILES the archive holds. */
  state_files: z.array(z.enum(STATE_FILES)),
});
export type Manifest = z.infer<typeof Manifest>;

export function keyFingerprint(key: string): string {
  return createHash('sha256').update(key.trim()).digest('hex').slice(0, 16);
}

/** The manifest of an extracted archive, checked: a file that is not a Berth backup is refused with why. */
export async function readManifest(dir: string, archive: string): Promise<Manifest> {
  let text: string;
  try {
    text = await readFile(join(dir, MANIFEST), 'utf8');
  } catch (error) {
    throw new CliError(`${archive} is not a Berth backup: it has no ${MANIFEST}`, { cause: error });
  }
  const parsed = Manifest.safeParse(JSON.parse(text));
  if (!parsed.success) {
    throw new CliError(`${archive} has a manifest this berth cannot read: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}
