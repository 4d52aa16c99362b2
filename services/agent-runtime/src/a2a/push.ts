/**
 * A2A push notifications: configs that clients set on tasks (at SendMessage or later), and the
 * notification each gets when its task's run ends (completed, failed, canceled or
 * input-required): the Task, in the shape of the A2A version the config was set with (1.0
 * `{task}`, 0.3 the Task with `kind`). Deliveries are run webhooks' (runs/webhooks.ts): the same
 * queue, retries and records, signed with the deployment's secret (`webhook-id`,
 * `webhook-timestamp`, `webhook-signature`), the config's `token` in `X-A2A-Notification-Token`,
 * and the receiver's address checked when the config is set and again when it is sent.
 */
import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { RequestValidationError } from '@berth/errors';
import type { Logger } from '@berth/log';
import { INVALID_PARAMS, JsonRpcError } from '../api/json-rpc.js';
import type { WebhookDelivery, WebhookTargets } from '../runs/webhooks.js';
import type { Run, RunStore } from '../storage/runs.js';
import type { JsonObject } from '../storage/sql.js';
import type { ThreadStore } from '../storage/threads.js';
import { taskOf, taskView } from './tasks.js';
import { eventWire, type PushConfig, type Version } from './wire.js';

/** The header carrying a config's token (the spec's name). */
export const TOKEN_HEADER = 'X-A2A-Notification-Token';

export interface PushConfigInput {
  id?: string;
  url: string;
  token?: string;
  authentication?: unknown;
}

export interface A2aPushOptions {
  /**
   * Configs one task may have.
   * @default 10
   */
  maxPerTask?: number;
}

interface Row {
  task_id: string;
  config_id: string;
  thread_id: string;
  url: string;
  token: string | null;
  version: Version;
}

const configOf = (row: Row): PushConfig => ({ id: row.config_id, taskId: row.task_id, url: row.url, ...(row.token !== null ? { token: row.token } : {}) });

export class A2aPush {
  private readonly maxPerTask: number;

  constructor(
    private readonly deps: { pool: pg.Pool; targets: WebhookTargets; runs: RunStore; threads: ThreadStore; log: Logger },
    options: A2aPushOptions = {},
  ) {
    this.maxPerTask = options.maxPerTask ?? 10;
  }

  /** -32602 unless the receiver may get notifications: an absolute http(s) URL at an address egress allows. */
  async check(config: PushConfigInput): Promise<void> {
    if (config.authentication !== undefined) {
      // Credentials would be a secret kept in clear: the token and the signature do their job.
      throw new JsonRpcError(
        INVALID_PARAMS,
        'authentication is not supported for push notifications: use token (sent as X-A2A-Notification-Token) and check the webhook-signature header',
        {
          field: 'authentication',
        },
      );
    }
    if (!/^https?:\/\//i.test(config.url))
      throw new JsonRpcError(INVALID_PARAMS, 'the push notification url must be an absolute http(s) URL', { url: config.url });
    try {
      await this.deps.targets.check(config.url);
    } catch (error) {
      if (!(error instanceof RequestValidationError)) throw error;
      const msg = error.issues[0]?.msg ?? 'refused';
      throw new JsonRpcError(
        INVALID_PARAMS,
        `push notification url refused: ${msg}`,
        { url: config.url, problems: error.issues.map((i) => ({ ...i, loc: ['params', 'url'] })) },
        { cause: error },
      );
    }
  }

  /** Sets (or replaces, by id) a config of a task; -32602 past the per-task limit. */
  async create(taskId: string, threadId: string, config: PushConfigInput, version: Version = '1.0'): Promise<PushConfig> {
    const id = config.id ?? randomUUID();
    const { rows } = await this.deps.pool.query<Row>(
      `INSERT INTO a2a_push_configs (task_id, config_id, thread_id, url, token, version)
       SELECT $1, $2, $3, $4, $5, $6 WHERE (SELECT count(*) FROM a2a_push_configs WHERE task_id = $1 AND config_id <> $2) < $7
       ON CONFLICT (task_id, config_id) DO UPDATE SET url = EXCLUDED.url, token = EXCLUDED.token, version = EXCLUDED.version
       RETURNING *`,
      [taskId, id, threadId, config.url, config.token ?? null, version, this.maxPerTask],
    );
    if (!rows[0])
      throw new JsonRpcError(INVALID_PARAMS, `Task ${taskId} has ${this.maxPerTask} push notification configs already, the most it may have`, {
        taskId,
        limit: this.maxPerTask,
      });
    return configOf(rows[0]);
  }

  async get(taskId: string, id: string | undefined): Promise<PushConfig> {
    const { rows } = await this.deps.pool.query<Row>(
      'SELECT * FROM a2a_push_configs WHERE task_id = $1 AND ($2::text IS NULL OR config_id = $2) ORDER BY created_at LIMIT 1',
      [taskId, id ?? null],
    );
    if (!rows[0]) throw new JsonRpcError(INVALID_PARAMS, `Task ${taskId} has no push notification config${id ? ` ${id}` : ''}`, { taskId, id: id ?? null });
    return configOf(rows[0]);
  }

  async list(taskId: string): Promise<PushConfig[]> {
    const { rows } = await this.deps.pool.query<Row>('SELECT * FROM a2a_push_configs WHERE task_id = $1 ORDER BY created_at, config_id', [taskId]);
    return rows.map(configOf);
  }

  async delete(taskId: string, id: string): Promise<void> {
    const { rowCount } = await this.deps.pool.query('DELETE FROM a2a_push_configs WHERE task_id = $1 AND config_id = $2', [taskId, id]);
    if (!rowCount) throw new JsonRpcError(INVALID_PARAMS, `Task ${taskId} has no push notification config ${id}`, { taskId, id });
  }

  async deleteAll(taskId: string): Promise<void> {
    await this.deps.pool.query('DELETE FROM a2a_push_configs WHERE task_id = $1', [taskId]);
  }

  /**
   * Queues the notifications of a run that has ended (the worker calls it). Never throws: a run's
   * outcome stands whatever happens to its notifications.
   */
  async runEnded(run: Run, delivery: Pick<WebhookDelivery, 'sendPayload'>): Promise<void> {
    try {
      const { rows } = await this.deps.pool.query<Row>('SELECT * FROM a2a_push_configs WHERE task_id = $1 ORDER BY created_at', [run.run_id]);
      if (rows.length === 0) return;
      const task = taskOf(await taskView(this.deps, run));
      for (const row of rows) {
        const payload = eventWire({ task }, row.version) as JsonObject;
        await delivery.sendPayload(run, row.url, payload, { headers: row.token !== null ? { [TOKEN_HEADER]: row.token } : {}, stamp: false });
      }
    } catch (error) {
      this.deps.log.error({ err: error, runId: run.run_id }, 'could not queue the A2A push notifications of the run');
    }
  }
}
