/**
 * Run webhooks: a run created with `webhook: <url>` has its outcome POSTed there once it ends.
 * Deliveries go through their own queue (`agent-webhooks`), so a slow or failing receiver never
 * holds a run slot, the run, or its thread's next run. Each is signed per the Standard Webhooks
 * specification (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>`
 * of `${id}.${timestamp}.${body}`), retried with exponential backoff on network errors, timeouts,
 * 5xx and 429 (not on other answers), and recorded in the `webhooks` table.
 *
 * Receivers are tenant-chosen URLs: private, loopback, link-local and metadata addresses are
 * refused unless the operator allows their CIDRs, when the run is created (422) and again by the
 * connection itself (its DNS lookup is checked, so the address it connects to is the one checked).
 */
import { createHmac, randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { webhookKey } from '@berth/agent-contract';
import { CidrSet, EgressRefusedError, guardedLookup, refusedAddressKind } from '@berth/egress';
import { RequestValidationError } from '@berth/errors';
import type { Logger } from '@berth/log';
import { JobQueue, JobWorker, defineJobCatalog, type JobContext, type QueueBackendConfig } from '@berth/queue';
import { z } from 'zod';
import { runJson } from '../api/schemas.js';
import type { Json, JsonObject } from '../storage/sql.js';
import type { Run, RunStatus } from '../storage/runs.js';
import type { WebhookAttempt, WebhookRecord, WebhookStore } from '../storage/webhooks.js';
import { webhookAttempts } from './metrics.js';

export const WEBHOOK_QUEUE = 'agent-webhooks';

export interface WebhookConfig {
  /** The deployment's signing secret, `whsec_<base64 of 24 to 64 random bytes>`. */
  secret: string;
  /**
   * Non-public CIDRs receivers may be at (`127.0.0.0/8,::1` for `berth dev`). A cloud metadata
   * address only when listed on its own. @default none: public addresses only
   */
  privateEgress?: readonly string[];
  /**
   * Deliveries go through `fetch`, whose egress proxy checks receivers' addresses (an agent server
   * in a container: it has no network and no DNS of its own). IP literals are still checked here.
   * @default false: connect directly, checking the addresses names resolve to
   */
  proxied?: boolean;
  /** Longest one attempt may take. @default 10_000 */
  timeoutMs?: number;
  /** Attempts in all, the first included. @default 5 */
  attempts?: number;
  /** Wait before the first retry; doubled for each next one. @default 2000 */
  backoffMs?: number;
}

/** The `webhook-signature` value of a delivery: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body`. */
export function signWebhook(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** A URL for logs and records: the query string may carry the receiver's own secret. */
export function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}${parsed.search ? '?…' : ''}`;
  } catch {
    return '(not a URL)';
  }
}

/** What the run ended with, for its webhook. */
export interface RunEnd {
  status: Exclude<RunStatus, 'pending' | 'running'>;
  startedAt: Date;
  endedAt: Date;
  values: Json | null;
  error: { error: string; message: string } | null;
}

/** The POST body without `webhook_sent_at`: the run (as the API shows it) and how it ended. */
export function webhookPayload(run: Run, end: RunEnd): JsonObject {
  const body = {
    ...runJson({ ...run, status: end.status, updated_at: end.endedAt }),
    run_started_at: end.startedAt.toISOString(),
    run_ended_at: end.endedAt.toISOString(),
    values: end.values,
    ...(end.error ? { error: end.error } : {}),
  };
  return JSON.parse(JSON.stringify(body)) as JsonObject;
}

const webhookJobs = (config: Required<Omit<WebhookConfig, 'secret' | 'privateEgress' | 'proxied'>>) =>
  defineJobCatalog({
    'webhook.deliver': {
      schema: z.object({ webhook_id: z.uuid() }),
      attempts: config.attempts,
      backoff: { type: 'exponential', delayMs: config.backoffMs },
      // The request has its own timeout; this one only catches a handler that hangs elsewhere.
      timeoutMs: config.timeoutMs + 10_000,
      removeOnComplete: true,
      removeOnFail: true,
    },
  });
type WebhookJobs = ReturnType<typeof webhookJobs>;

/** A receiver that did not take a delivery this time; BullMQ retries it after the backoff. */
export class WebhookAttemptError extends Error {
  override readonly name = 'WebhookAttemptError';
}

/**
 * The guard on receivers' addresses: an IP literal is checked here (sockets skip `lookup` for
 * literals), a name by the lookup the connection uses.
 */
export class WebhookTargets {
  private readonly allowed: CidrSet | undefined;
  readonly lookup: LookupFunction;

  /**
   * @param ownRoutes - the project has an `http.app`: a relative webhook (`/path`) is POSTed to it.
   * @param proxied - names are resolved and checked by the egress proxy deliveries go through.
   */
  constructor(
    privateEgress: readonly string[] = [],
    private readonly ownRoutes = false,
    readonly proxied = false,
  ) {
    this.allowed = privateEgress.length > 0 ? new CidrSet(privateEgress) : undefined;
    this.lookup = guardedLookup(this.allowed);
  }

  /** EgressRefusedError when the URL's host is an IP literal the guard refuses. */
  assertLiteral(url: URL): void {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    if (isIP(host) && refusedAddressKind(host, this.allowed) !== undefined) throw new EgressRefusedError(host, host);
  }

  /**
   * Checks a run's `webhook` when the run is created: 422 for a relative path, another scheme, or
   * a host that is (or resolves to) an address the guard refuses.
   */
  async check(webhook: string): Promise<void> {
    const invalid = (msg: string, cause?: unknown) =>
      new RequestValidationError([{ loc: ['body', 'webhook'], msg, type: 'value_error' }], cause ? { cause } : undefined);
    if (webhook.startsWith('/')) {
      if (this.ownRoutes) return;
      throw invalid(
        "a relative webhook calls the server's own custom routes, which this project does not have (no http.app in langgraph.json): give an absolute http(s) URL",
      );
    }
    let url: URL;
    try {
      url = new URL(webhook);
    } catch (error) {
      throw invalid('not a URL: give an absolute http(s) URL', error);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(`${url.protocol.slice(0, -1)} URLs are not supported: give an http(s) URL`);
    try {
      this.assertLiteral(url);
      if (this.proxied) return;
      await new Promise<void>((resolve, reject) =>
        this.lookup(url.hostname.replace(/^\[|\]$/g, ''), { all: true }, (error) => (error ? reject(error) : resolve())),
      );
    } catch (error) {
      if (error instanceof EgressRefusedError) throw invalid(`${error.message}; the operator can allow its range with BERTH_WEBHOOK_PRIVATE_EGRESS`, error);
      throw invalid(`the webhook's host ${url.hostname} does not resolve (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`, error);
    }
  }
}

/**
 * The worker role's side: records a finished run's webhook and delivers it from the
 * `agent-webhooks` queue.
 */
export class WebhookDelivery {
  private readonly key: Buffer;
  private readonly settings: Required<Omit<WebhookConfig, 'secret' | 'privateEgress' | 'proxied'>>;
  private readonly catalog: WebhookJobs;
  private readonly targets: WebhookTargets;
  private queue?: JobQueue<WebhookJobs>;
  private worker?: JobWorker<WebhookJobs>;

  constructor(
    private readonly deps: {
      store: WebhookStore;
      queue: QueueBackendConfig;
      log: Logger;
      /** The project's `http.app`, which relative webhooks (`/path`) are POSTed to. */
      ownRoutes?: (request: Request) => Promise<Response>;
    },
    config: WebhookConfig,
  ) {
    this.key = webhookKey(config.secret);
    this.settings = { timeoutMs: config.timeoutMs ?? 10_000, attempts: config.attempts ?? 5, backoffMs: config.backoffMs ?? 2000 };
    this.catalog = webhookJobs(this.settings);
    this.targets = new WebhookTargets(config.privateEgress, deps.ownRoutes !== undefined, config.proxied);
  }

  async start(concurrency = 10): Promise<void> {
    this.queue = new JobQueue(this.catalog, WEBHOOK_QUEUE, this.deps.queue, { log: this.deps.log });
    this.worker = new JobWorker(
      this.catalog,
      WEBHOOK_QUEUE,
      this.deps.queue,
      { 'webhook.deliver': (job, ctx) => this.deliver(job.webhook_id, ctx) },
      { concurrency, log: this.deps.log },
    );
    await Promise.all([this.queue.ready(), this.worker.ready()]);
  }

  /**
   * Records the webhook of a run that has ended and queues its delivery. Never throws: a run's
   * outcome stands whatever happens to its webhook (a failure is logged and recorded).
   */
  async send(run: Run, url: string, end: RunEnd): Promise<void> {
    await this.sendPayload(run, url, webhookPayload(run, end));
  }

  /**
   * Records and queues a signed POST of `payload` about a run (a run webhook, an A2A push
   * notification), with `headers` besides the signature's; `stamp: false` sends the body as it is,
   * without `webhook_sent_at`. Never throws (a failure is logged and recorded).
   */
  async sendPayload(
    run: Pick<Run, 'run_id' | 'thread_id'>,
    url: string,
    payload: JsonObject,
    options: { headers?: Record<string, string>; stamp?: boolean } = {},
  ): Promise<void> {
    const webhookId = randomUUID();
    const log = this.deps.log.child({ runId: run.run_id, webhookId, webhook: redactedUrl(url) });
    try {
      await this.deps.store.create({
        webhook_id: webhookId,
        run_id: run.run_id,
        thread_id: run.thread_id,
        url,
        payload,
        ...(options.headers ? { headers: options.headers } : {}),
        ...(options.stamp === false ? { stamp_sent_at: false } : {}),
      });
    } catch (error) {
      log.error({ err: error }, "could not record the run's webhook: it is not sent");
      return;
    }
    try {
      await this.queue!.enqueue('webhook.deliver', { webhook_id: webhookId }, { jobId: `webhook-${webhookId}` });
    } catch (error) {
      log.error({ err: error }, "could not queue the run's webhook: it is not sent");
      await this.deps.store
        .fail(webhookId, `not queued: ${(error as Error).message}`)
        .catch((record: unknown) => log.error({ err: record }, 'could not record the failed webhook'));
    }
  }

  private async deliver(webhookId: string, ctx: JobContext): Promise<{ state: string }> {
    const record = await this.deps.store.get(webhookId);
    if (!record || record.state !== 'pending') return { state: record?.state ?? 'gone' };
    const log = ctx.log.child({ runId: record.run_id, webhook: redactedUrl(record.url) });
    const result = await this.attempt(webhookId, record, ctx.signal);
    const last = ctx.attempt >= this.settings.attempts;
    const outcome: WebhookAttempt = result.retry && last ? { ...result.attempt, state: 'failed' } : result.attempt;
    await this.deps.store.recordAttempt(webhookId, outcome);
    webhookAttempts.inc({ result: outcome.state === 'pending' ? 'retrying' : outcome.state });
    if (outcome.state === 'pending') throw new WebhookAttemptError(`attempt ${ctx.attempt} of ${this.settings.attempts}: ${outcome.error}`);
    if (outcome.state === 'failed') log.warn({ attempts: ctx.attempt, statusCode: outcome.statusCode, error: outcome.error }, 'webhook not delivered');
    return { state: outcome.state };
  }

  /** One POST: delivered on 2xx; retried on network errors, timeouts, 5xx and 429; failed otherwise. */
  private async attempt(
    webhookId: string,
    record: Pick<WebhookRecord, 'url' | 'payload' | 'headers' | 'stamp_sent_at'>,
    signal: AbortSignal,
  ): Promise<{ attempt: WebhookAttempt; retry: boolean }> {
    const url = record.url;
    const timestamp = Math.floor(Date.now() / 1000);
    const body = JSON.stringify(record.stamp_sent_at ? { ...record.payload, webhook_sent_at: new Date(timestamp * 1000).toISOString() } : record.payload);
    const headers = {
      ...record.headers,
      'content-type': 'application/json',
      'user-agent': 'Berth-Webhooks/1',
      'webhook-id': webhookId,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signWebhook(this.key, webhookId, timestamp, body),
    };
    let statusCode: number;
    try {
      if (url.startsWith('/')) {
        statusCode = await this.postToOwnRoutes(url, headers, body, AbortSignal.any([signal, AbortSignal.timeout(this.settings.timeoutMs)]));
        return this.outcome(statusCode);
      }
      const target = new URL(url);
      this.targets.assertLiteral(target);
      const deadline = AbortSignal.any([signal, AbortSignal.timeout(this.settings.timeoutMs)]);
      statusCode = this.targets.proxied ? await postByFetch(target, headers, body, deadline) : await post(target, headers, body, this.targets.lookup, deadline);
    } catch (error) {
      // A receiver now at a refused address stays refused: no retry.
      if (error instanceof EgressRefusedError) return { attempt: { state: 'failed', statusCode: null, error: error.message }, retry: false };
      const timedOut = (error as Error).name === 'TimeoutError' || (error as Error).name === 'AbortError';
      const message = timedOut ? `no answer within ${this.settings.timeoutMs} ms` : (error as Error).message;
      return { attempt: { state: 'pending', statusCode: null, error: message }, retry: true };
    }
    return this.outcome(statusCode);
  }

  private outcome(statusCode: number): { attempt: WebhookAttempt; retry: boolean } {
    if (statusCode >= 200 && statusCode < 300) return { attempt: { state: 'delivered', statusCode, error: null }, retry: false };
    const retry = statusCode >= 500 || statusCode === 429;
    return { attempt: { state: retry ? 'pending' : 'failed', statusCode, error: `the receiver answered ${statusCode}` }, retry };
  }

  /** A relative webhook: a POST handed to the project's http.app in this process, not over the network. */
  private async postToOwnRoutes(path: string, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<number> {
    if (!this.deps.ownRoutes) throw new Error("a relative webhook needs the project's http.app, which this server has not loaded");
    const response = await this.deps.ownRoutes(new Request(new URL(path, 'http://localhost'), { method: 'POST', headers, body, signal }));
    await response.body?.cancel();
    return response.status;
  }

  async close(): Promise<void> {
    await this.worker?.close();
    await this.queue?.close();
  }
}

/** POSTs `body` through `fetch` (its proxy) and resolves with the answer's status code (redirects are not followed). */
async function postByFetch(url: URL, headers: Record<string, string>, body: string, signal: AbortSignal): Promise<number> {
  const response = await fetch(url, { method: 'POST', headers, body, redirect: 'manual', signal });
  await response.body?.cancel();
  return response.status;
}

/** POSTs `body` and resolves with the answer's status code (redirects are not followed). */
function post(url: URL, headers: Record<string, string>, body: string, lookup: LookupFunction, signal: AbortSignal): Promise<number> {
  const request = url.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'POST', headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) }, lookup, agent: false, signal },
      (res) => {
        // The answer's body is not used: read it off so the socket closes.
        res.resume();
        res.on('error', () => undefined);
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', (error) => reject(signal.aborted ? (signal.reason as Error) : error));
    req.end(body);
  });
}
