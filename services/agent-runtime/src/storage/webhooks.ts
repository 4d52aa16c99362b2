/**
 * Webhook deliveries of finished runs: what to send, and how each attempt went.
 */
import type pg from 'pg';
import { jsonParam, type JsonObject } from './sql.js';

export type WebhookState = 'pending' | 'delivered' | 'failed';

export interface WebhookRecord {
  webhook_id: string;
  run_id: string;
  thread_id: string;
  url: string;
  payload: JsonObject;
  /** Sent with every attempt, besides the signature headers. */
  headers: Record<string, string>;
  /** Whether each attempt adds `webhook_sent_at` to the body (run webhooks do; A2A notifications do not). */
  stamp_sent_at: boolean;
  state: WebhookState;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  updated_at: Date;
  delivered_at: Date | null;
}

/** How one attempt went: the receiver's status code (when it answered) and why it did not count. */
export interface WebhookAttempt {
  state: WebhookState;
  statusCode: number | null;
  error: string | null;
}

const COLUMNS =
  'webhook_id, run_id, thread_id, url, payload, headers, stamp_sent_at, state, attempts, last_status_code, last_error, created_at, updated_at, delivered_at';

export class WebhookStore {
  constructor(private readonly pool: pg.Pool) {}

  async create(input: {
    webhook_id: string;
    run_id: string;
    thread_id: string;
    url: string;
    payload: JsonObject;
    headers?: Record<string, string>;
    stamp_sent_at?: boolean;
  }): Promise<void> {
    await this.pool.query(
      'INSERT INTO webhooks (webhook_id, run_id, thread_id, url, payload, headers, stamp_sent_at) VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7)',
      [input.webhook_id, input.run_id, input.thread_id, input.url, jsonParam(input.payload), jsonParam(input.headers ?? {}), input.stamp_sent_at ?? true],
    );
  }

  async get(webhookId: string): Promise<WebhookRecord | undefined> {
    const { rows } = await this.pool.query<WebhookRecord>(`SELECT ${COLUMNS} FROM webhooks WHERE webhook_id = $1`, [webhookId]);
    return rows[0];
  }

  /** The deliveries of a run, oldest first. */
  async listForRun(runId: string): Promise<WebhookRecord[]> {
    const { rows } = await this.pool.query<WebhookRecord>(`SELECT ${COLUMNS} FROM webhooks WHERE run_id = $1 ORDER BY created_at`, [runId]);
    return rows;
  }

  /** Counts one attempt and records its outcome. */
  async recordAttempt(webhookId: string, attempt: WebhookAttempt): Promise<void> {
    await this.pool.query(
      `UPDATE webhooks SET attempts = attempts + 1, state = $2, last_status_code = $3, last_error = $4, updated_at = now(),
         delivered_at = CASE WHEN $2 = 'delivered' THEN now() ELSE delivered_at END
       WHERE webhook_id = $1`,
      [webhookId, attempt.state, attempt.statusCode, attempt.error],
    );
  }

  /** Marks a delivery failed without an attempt (it could not be queued). */
  async fail(webhookId: string, error: string): Promise<void> {
    await this.pool.query("UPDATE webhooks SET state = 'failed', last_error = $2, updated_at = now() WHERE webhook_id = $1", [webhookId, error]);
  }
}
