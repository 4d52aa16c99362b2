/**
 * The agent card of an assistant, in A2A 1.0's shape (`supportedInterfaces`) or 0.3's (`url`,
 * `preferredTransport`), at the URL the client reached this server by: behind the gateway the
 * deployment's public URL (`x-forwarded-proto`, `x-forwarded-host` and `x-forwarded-prefix`, which
 * the gateway sets to `/d/<deployment_id>`).
 */
import { createHash } from 'node:crypto';
import type { Request } from 'express';
import type { Assistant } from '../storage/assistants.js';
import type { Version } from './wire.js';

/** Media types every graph takes and gives: text (a human message) and JSON (DataParts). */
const MODES = ['text/plain', 'application/json'];

export interface CardOptions {
  /** The project's description of the assistant's graph (`graphs.<id>.description`). */
  graphDescription: string | undefined;
  pushNotifications: boolean;
}

const first = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value)?.split(',')[0]?.trim();

/** The base URL the client reached this server by (no trailing slash). */
export function publicBaseUrl(req: Request): string {
  const proto = first(req.headers['x-forwarded-proto']);
  const host = first(req.headers['x-forwarded-host']) ?? req.headers.host ?? 'localhost';
  const prefix = first(req.headers['x-forwarded-prefix']) ?? '';
  const scheme = proto === 'https' || proto === 'http' ? proto : req.protocol;
  // Only a plain path prefix: a header is not a way to point clients somewhere else on the host.
  const path = /^(\/[A-Za-z0-9._~-]+)*$/.test(prefix) ? prefix : '';
  return `${scheme}://${host}${path}`;
}

export function agentCard(req: Request, ref: string, assistant: Assistant, options: CardOptions, version: Version | 'both'): Record<string, unknown> {
  const url = `${publicBaseUrl(req)}/a2a/${encodeURIComponent(ref)}`;
  const description = assistant.description ?? options.graphDescription ?? `The ${assistant.graph_id} graph`;
  const common = {
    name: assistant.name,
    description,
    version: String(assistant.version),
    defaultInputModes: MODES,
    defaultOutputModes: MODES,
    skills: [{ id: assistant.graph_id, name: assistant.name, description, tags: ['langgraph', assistant.graph_id], inputModes: MODES, outputModes: MODES }],
  };
  const capabilities = { streaming: true, pushNotifications: options.pushNotifications, extensions: [] };
  const v10 = {
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ],
    capabilities: { ...capabilities, extendedAgentCard: true },
  };
  const v03 = { protocolVersion: '0.3.0', url, preferredTransport: 'JSONRPC', supportsAuthenticatedExtendedCard: true, capabilities };
  if (version === '1.0') return { ...common, ...v10 };
  if (version === '0.3') return { ...common, ...v03 };
  // Neither asked for: 1.0's card, readable by 0.3 clients too (they look for `url`).
  return { ...common, ...v03, ...v10 };
}

/** A strong ETag of a card's JSON. */
export function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}
