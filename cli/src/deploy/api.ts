/**
 * The deployment API of a gateway (`/v2/deployments…`) as typed calls for the deploy commands.
 */
import { createReadStream } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import type { GatewayClient } from '../client.js';
import type { SseFrame } from '@berth/http';

export interface Deployment {
  id: string;
  tenant_id: string;
  name: string;
  source: string;
  source_config: { deployment_type?: string } & Record<string, unknown>;
  source_revision_config: Record<string, unknown>;
  status: string;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  secrets: { name: string }[];
  deployment_url: string;
  created_at: string;
  updated_at: string;
}

export interface Revision {
  id: string;
  deployment_id: string;
  status: string;
  source: string;
  source_revision_config: Record<string, unknown>;
  status_message: string;
  created_at: string;
  updated_at: string;
}

export interface LogEntry {
  id: number;
  timestamp: string;
  level: string;
  message: string;
  type: string;
}

export interface LogPage {
  logs: LogEntry[];
  next_offset: number;
  revision_id: string | null;
}

export interface Page<T> {
  resources: T[];
  offset: number;
}

export interface Uploaded {
  object_path: string;
  revision_id: string | null;
}

export type Secret = { name: string; value: string };

/** Statuses after which a revision changes no more. */
export function isTerminal(status: string): boolean {
  return status === 'DEPLOYED' || status.endsWith('_FAILED') || status === 'INTERRUPTED' || status === 'SKIPPED';
}

export class DeploymentsApi {
  constructor(readonly client: GatewayClient) {}

  list(query: { nameContains?: string; limit?: number; offset?: number } = {}): Promise<Page<Deployment>> {
    const params = new URLSearchParams();
    if (query.nameContains) params.set('name_contains', query.nameContains);
    params.set('limit', String(query.limit ?? 100));
    if (query.offset) params.set('offset', String(query.offset));
    return this.client.request('GET', `/v2/deployments?${params}`);
  }

  /** The deployment named exactly `name` (name_contains finds candidates; the exact name decides). */
  async findByName(name: string): Promise<Deployment | undefined> {
    let offset = 0;
    for (;;) {
      const page = await this.list({ nameContains: name, offset });
      const exact = page.resources.find((d) => d.name === name);
      if (exact) return exact;
      if (page.resources.length === 0 || page.offset <= offset) return undefined;
      offset = page.offset;
    }
  }

  get(id: string): Promise<Deployment> {
    return this.client.request('GET', `/v2/deployments/${encodeURIComponent(id)}`);
  }

  create(body: {
    name: string;
    source: 'internal_source';
    source_config: { deployment_type: string };
    source_revision_config: { langgraph_config_path: string };
    secrets: Secret[];
  }): Promise<Deployment> {
    return this.client.request('POST', '/v2/deployments', body);
  }

  update(id: string, body: { source_revision_config?: Record<string, string>; secrets?: Secret[] }): Promise<Deployment> {
    return this.client.request('PATCH', `/v2/deployments/${encodeURIComponent(id)}`, body);
  }

  delete(id: string): Promise<void> {
    return this.client.request('DELETE', `/v2/deployments/${encodeURIComponent(id)}`);
  }

  revisions(id: string, limit: number): Promise<Page<Revision>> {
    return this.client.request('GET', `/v2/deployments/${encodeURIComponent(id)}/revisions?limit=${limit}`);
  }

  revision(id: string, revisionId: string): Promise<Revision> {
    return this.client.request('GET', `/v2/deployments/${encodeURIComponent(id)}/revisions/${encodeURIComponent(revisionId)}`);
  }

  /**
   * Log entries of one revision, or (without revisionId) of the latest one: the first `limit` after
   * `offset`, the last `tail`, or the last `limit` before the entry `before`.
   */
  logs(id: string, query: { revisionId?: string; type?: string; offset?: number; limit?: number; tail?: number; before?: number }): Promise<LogPage> {
    const params = new URLSearchParams();
    if (query.type) params.set('type', query.type);
    if (query.offset) params.set('offset', String(query.offset));
    if (query.before) params.set('before', String(query.before));
    // tail is the count itself (the gateway refuses it with a limit).
    if (query.tail) params.set('tail', String(query.tail));
    else params.set('limit', String(query.limit ?? 1000));
    const base = `/v2/deployments/${encodeURIComponent(id)}`;
    const path = query.revisionId ? `${base}/revisions/${encodeURIComponent(query.revisionId)}/logs` : `${base}/logs`;
    return this.client.request('GET', `${path}?${params}`);
  }

  /**
   * The entries of a revision's log after `offset`, then each as it is written, until the log
   * ends (an `end` frame) or `signal` aborts: the gateway's server-sent events (`follow=true`).
   */
  followLogs(id: string, query: { revisionId: string; type?: string; offset: number; signal?: AbortSignal }): AsyncGenerator<SseFrame> {
    const params = new URLSearchParams({ follow: 'true' });
    if (query.type) params.set('type', query.type);
    const path = `/v2/deployments/${encodeURIComponent(id)}/revisions/${encodeURIComponent(query.revisionId)}/logs?${params}`;
    // Last-Event-ID, as a reconnecting EventSource sends it: entries after that one.
    return this.client.events(path, { lastEventId: String(query.offset), ...(query.signal ? { signal: query.signal } : {}) });
  }

  /** Streams a tarball file to the deployment; `onProgress` sees the bytes sent so far. */
  upload(id: string, file: string, bytes: number, onProgress?: (sent: number) => void): Promise<Uploaded> {
    let sent = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        sent += chunk.length;
        onProgress?.(sent);
        done(null, chunk);
      },
    });
    const source = createReadStream(file).once('error', (error) => counter.destroy(error));
    const stream = source.pipe(counter);
    return this.client.request('POST', `/v2/deployments/${encodeURIComponent(id)}/upload`, {
      stream: Readable.toWeb(stream) as ReadableStream<Uint8Array>,
      contentType: 'application/gzip',
      length: bytes,
    });
  }
}
