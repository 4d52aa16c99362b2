/**
 * The two secrets of a login flow. `auth_id` (the waiter's) is `brt_auth_` + 43 base64url
 * characters (256 random bits); `approval_id` (the approval URL's) is 32 base64url characters
 * (192 bits). Only their SHA-256 digests are stored.
 */
import { createHash, randomBytes } from 'node:crypto';

export const AUTH_ID_PREFIX = 'brt_auth_';

const authIdPattern = /^brt_auth_[A-Za-z0-9_-]{43}$/;
const approvalIdPattern = /^[A-Za-z0-9_-]{32}$/;

export function generateAuthId(): string {
  return AUTH_ID_PREFIX + randomBytes(32).toString('base64url');
}

export function generateApprovalId(): string {
  return randomBytes(24).toString('base64url');
}

/** Cheap shape checks, so that garbage never reaches the database (it is simply not found). */
export function looksLikeAuthId(value: string): boolean {
  return authIdPattern.test(value);
}

export function looksLikeApprovalId(value: string): boolean {
  return approvalIdPattern.test(value);
}

export function digestId(id: string): Buffer {
  return createHash('sha256').update(id, 'utf8').digest();
}
