/**
 * `berth dev`'s run webhooks: signed with a secret kept in the project's `.berth/webhook-secret`
 * (0600, made on first use, the same across restarts so a local receiver keeps verifying), and
 * allowed to reach loopback receivers (a developer's receiver runs on the same machine).
 */
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { InvalidWebhookSecretError, generateWebhookSecret, webhookKey } from '@berth/agent-contract';
import { CliError } from '../client.js';

/** Loopback only: private networks stay refused under `berth dev` too. */
export const DEV_WEBHOOK_EGRESS = ['127.0.0.0/8', '::1'] as const;

/** The project's webhook signing secret and the file it is in; made when there is none. */
export async function devWebhookSecret(stateDir: string): Promise<{ secret: string; file: string }> {
  const file = join(stateDir, 'webhook-secret');
  const existing = await readFile(file, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw error;
  });
  if (existing !== undefined) {
    const secret = existing.trim();
    try {
      webhookKey(secret);
    } catch (error) {
      if (error instanceof InvalidWebhookSecretError) throw new CliError(`${file}: ${error.message} (delete the file to get a new one)`, { cause: error });
      throw error;
    }
    return { secret, file };
  }
  const secret = generateWebhookSecret();
  await mkdir(stateDir, { recursive: true });
  await writeFile(file, `${secret}\n`, { mode: 0o600, flag: 'wx' });
  await chmod(file, 0o600);
  return { secret, file };
}
