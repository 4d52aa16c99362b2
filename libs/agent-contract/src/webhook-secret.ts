/**
 * A deployment's webhook signing secret, in the Standard Webhooks form (`whsec_` + base64): the
 * control plane makes one per deployment (and `berth dev` one per project), the agent server signs
 * its webhook deliveries with the key it stands for.
 */
import { randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A signing secret that is not `whsec_` followed by base64 of at least 24 bytes. */
export class InvalidWebhookSecretError extends Error {
  override readonly name = 'InvalidWebhookSecretError';
  constructor() {
    super('the webhook signing secret must be whsec_ followed by base64 of 24 to 64 random bytes');
  }
}

/** The HMAC key a `whsec_…` secret stands for (its base64-decoded part). */
export function webhookKey(secret: string): Buffer {
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : '';
  const key = Buffer.from(encoded, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(encoded) || key.length < 24 || key.length > 64) throw new InvalidWebhookSecretError();
  return key;
}

/** A new signing secret: 32 random bytes, written as Standard Webhooks writes them. */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}
