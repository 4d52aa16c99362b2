/**
 * Name-based UUIDs (RFC 4122 §4.3, version 5: SHA-1) and the ids of system assistants.
 */
import { createHash } from 'node:crypto';
import { isUuid } from '@berth/ids';

/** Namespace of system assistant ids, as used by the LangGraph servers. */
export const GRAPH_ASSISTANT_NAMESPACE = '6ba7b821-9dad-11d1-80b4-00c04fd430c8';

/** The version-5 UUID of `name` (UTF-8) in `namespace` (a UUID string), lower-case. */
export function uuidv5(name: string, namespace: string): string {
  if (!isUuid(namespace)) throw new TypeError(`not a UUID: ${namespace}`);
  const hash = createHash('sha1')
    .update(Buffer.from(namespace.replaceAll('-', ''), 'hex'))
    .update(name, 'utf8')
    .digest();
  hash[6] = (hash[6]! & 0x0f) | 0x50; // version 5
  hash[8] = (hash[8]! & 0x3f) | 0x80; // RFC 4122 variant
  const hex = hash.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The id of a graph's system assistant: `uuid5(graphId, 6ba7b821-9dad-11d1-80b4-00c04fd430c8)`. */
export function systemAssistantId(graphId: string): string {
  return uuidv5(graphId, GRAPH_ASSISTANT_NAMESPACE);
}
