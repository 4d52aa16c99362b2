/**
 * Deployment secrets at rest: AES-256-GCM with the control plane's secret key. A sealed value is
 * iv (12 bytes) || tag (16 bytes) || ciphertext; tampering or a wrong key fails to open.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { InvalidArgumentError } from '@berth/errors';

export class SecretBox {
  private readonly key: Buffer;

  /** @param key 32 bytes, or their base64 / base64url text. */
  constructor(key: Buffer | string) {
    this.key = typeof key === 'string' ? Buffer.from(key, 'base64') : key;
    if (this.key.length !== 32) throw new InvalidArgumentError('the secret key must be 32 bytes (base64-encoded)');
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
}
