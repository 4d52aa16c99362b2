/** Label values and object names that the API server accepts, made from ids that may not be. */
import { createHash } from 'node:crypto';

/** The first `length` hex digits of the SHA-256 of `value`: a stable, short suffix. */
export function shortHash(value: string, length: number): string {
  return createHash('sha256').update(value).digest('hex').slice(0, length);
}

const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/**
 * `value` when it is a valid label value, else a stable hash of it (ids are UUIDs in practice;
 * this keeps a surprising id from making every object invalid).
 */
export function labelValue(value: string): string {
  return value.length <= 63 && LABEL_VALUE.test(value) ? value : `h-${shortHash(value, 40)}`;
}
