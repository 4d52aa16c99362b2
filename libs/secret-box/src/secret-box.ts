/**
 * Secrets at rest (deployment secrets, export destination credentials): AES-256-GCM with the
 * platform's secret key. A sealed value is iv (12 bytes) || tag (16 bytes) || ciphertext; tampering or
 * a wrong key fails to open.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '@berth/errors';

export class SecretBox {
  private readonly key: Buffer;
  /** For derived credentials: a key of its own, not the encryption key itself. */
  private readonly credentialKey: Buffer;

  /** @param key 32 bytes, or their base64 / base64url text. */
  constructor(key: Buffer | string) {
    this.key = typeof key === 'string' ? Buffer.from(key, 'base64') : key;
    if (this.key.length !== 32) throw new InvalidArgumentError('the secret key must be 32 bytes (base64-encoded)');
    this.credentialKey = Buffer.from(hkdfSync('sha256', this.key, Buffer.alloc(0), 'berth/credentials', 32));
  }

  /** A fresh random key, base64-encoded (what `berth up` writes on first start). */
  static generateKey(): string {
    return randomBytes(32).toString('base64');
  }

  seal(plain: string): Buffer {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]);
  }

  open(sealed: Buffer): string {
    const decipher = createDecipheriv('aes-256-gcm', this.key, sealed.subarray(0, 12));
    decipher.setAuthTag(sealed.subarray(12, 28));
    return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
  }

  /**
   * A credential for `purpose` derived from the key (HKDF subkey, HMAC-SHA256, base64url): the same for the same
   * purpose, so it needs no storage, and a new key changes every one of them.
   */
  derive(purpose: string): string {
    return createHmac('sha256', this.credentialKey).update(purpose).digest('base64url');
  }

  /** The credential a revision's agent server requires on every request (the gateway adds it). */
  deploymentCredential(revisionId: string): string {
    return this.derive(`deployment-credential/${revisionId}`);
  }
}
