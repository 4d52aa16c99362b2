/**
 * The format of API keys and access tokens. A key is `brt_key_` + 32 random base64url characters;
 * its first 16 characters are the visible prefix shown in listings. Only SHA-256 digests are stored.
 */
import { createHash, randomBytes } from 'node:crypto';

export const API_KEY_PREFIX = 'brt_key_';
export const ACCESS_TOKEN_PREFIX = 'brt_tok_';
/** Console session tokens (the `berth_session` cookie): never accepted as a key or a bearer token. */
export const SESSION_TOKEN_PREFIX = 'brt_ses_';
const VISIBLE_LENGTH = 16;

export function generateApiKey(): { key: string; prefix: string } {
  const key = API_KEY_PREFIX + randomBytes(24).toString('base64url');
  return { key, prefix: key.slice(0, VISIBLE_LENGTH) };
}

export function generateAccessToken(): string {
  return ACCESS_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function generateSessionToken(): string {
  return SESSION_TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function digest(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Cheap shape check so garbage never reaches the database. */
export function looksLikeApiKey(value: string): boolean {
  return value.startsWith(API_KEY_PREFIX) && value.length === API_KEY_PREFIX.length + 32;
}

export function looksLikeAccessToken(value: string): boolean {
  return value.startsWith(ACCESS_TOKEN_PREFIX) && value.length === ACCESS_TOKEN_PREFIX.length + 43;
}

export function looksLikeSessionToken(value: string): boolean {
  return value.startsWith(SESSION_TOKEN_PREFIX) && value.length === SESSION_TOKEN_PREFIX.length + 43;
}
