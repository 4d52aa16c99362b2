/**
 * How the traces of an agent server's runs reach the trace store: the transport (`fetch`) of the
 * `langsmith` Client the tracer uses. The Client builds, batches and encodes the runs; this sends
 * its requests in the background, from a buffer of bounded size, retrying transient failures.
 *
 * Why the Client's own sending is not enough: it reports a failed batch only on the console (one
 * line per batch, or per run when its memory limit is reached), retries GET /info before every
 * batch while the store is unreachable, and its memory limit defaults to 1 GB. Here every ingest
 * request is accepted at once (so the Client never blocks, retries or logs), and a request that
 * cannot be delivered is dropped and counted: one pino warning per `warnIntervalMs` tells how many
 * runs were dropped and why.
 */
import { gunzipSync } from 'node:zlib';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Logger } from '@berth/log';
import { traceRequests, traceRunsDropped } from '../runs/metrics.js';

export interface TraceDeliveryOptions {
  /**
   * Bytes of trace requests held for sending at most; a request that does not fit is dropped.
   * @default 16 MiB
   */
  maxBufferedBytes?: number;
  /**
   * Attempts per request: network errors, timeouts, 408, 429 and 5xx answers are retried.
   * @default 4
   */
  attempts?: number;
  /**
   * Delay before the first retry, doubling with each one.
   * @default 1000
   */
  retryDelayMs?: number;
  /**
   * Longest one attempt may take.
   * @default 15000
   */
  requestTimeoutMs?: number;
  /**
   * Requests sent at the same time.
   * @default 2
   */
  concurrency?: number;
  /**
   * Drops are reported once per this long (the first drop opens the window).
   * @default 30000
   */
  warnIntervalMs?: number;
  /** The time of retries, the warning window and close's wait. @default systemClock */
  clock?: Clock;
}

interface Pending {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: Buffer;
}

/** Ingest calls of the LangSmith API (below any path prefix of the endpoint). */
const INGEST = [
  { method: 'POST', path: /\/runs(?:\/multipart|\/batch)?$/ },
  { method: 'PATCH', path: /\/runs\/[^/]+$/ },
];

const RETRYABLE = new Set([408, 425, 429, 500, 502, 503, 504]);

export class TraceDelivery {
  private readonly queue: Pending[] = [];
  private bufferedBytes = 0;
  private sending = 0;
  /** Resolves a close() waiting for the buffer to empty. */
  private idle?: () => void;
  private dropped = { runs: 0, reason: '' };
  private warnTimer?: Timer;
  private readonly options: Required<TraceDeliveryOptions>;

  constructor(
    private readonly log: Logger,
    options: TraceDeliveryOptions = {},
  ) {
    this.options = {
      maxBufferedBytes: 16 * 1024 * 1024,
      attempts: 4,
      retryDelayMs: 1000,
      requestTimeoutMs: 15_000,
      concurrency: 2,
      warnIntervalMs: 30_000,
      clock: systemClock,
      ...options,
    };
  }

  /** The Client's `fetchImplementation`. */
  readonly fetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(input instanceof Request ? input.url : input);
    const method = (init.method ?? 'GET').toUpperCase();
    if (INGEST.some((call) => call.method === method && call.path.test(url.pathname))) return this.accept(url.href, method, init);
    if (method === 'GET' && url.pathname.endsWith('/info')) return this.info(input, init);
    return fetch(input, init);
  };

  /**
   * Sends what is buffered for at most `timeoutMs`; what is left then is dropped (and reported
   * with the drops not reported yet).
   */
  async close(timeoutMs: number): Promise<void> {
    if (this.queue.length || this.sending) {
      const drained = new Promise<void>((resolve) => (this.idle = resolve));
      let timer: Timer | undefined;
      await Promise.race([drained, new Promise<void>((resolve) => (timer = this.options.clock.setTimeout(resolve, timeoutMs)))]);
      timer?.cancel();
    }
    for (const left of this.queue.splice(0)) {
      this.bufferedBytes -= left.body.length;
      this.drop(left, 'the agent server stopped before it was sent');
    }
    this.report();
  }

  /** Takes an ingest request: buffered for sending, the Client told it was accepted. */
  private async accept(url: string, method: string, init: RequestInit): Promise<Response> {
    const pending: Pending = {
      url,
      method,
      headers: Object.fromEntries(new Headers(init.headers).entries()),
      body: Buffer.from(await new Response(init.body ?? null).arrayBuffer()),
    };
    if (this.bufferedBytes + pending.body.length > this.options.maxBufferedBytes) {
      this.drop(pending, `the trace buffer is full (${this.options.maxBufferedBytes} bytes): the trace store takes runs slower than they come`);
    } else {
      this.queue.push(pending);
      this.bufferedBytes += pending.body.length;
      this.pump();
    }
    return new Response('{}', { status: 202, headers: { 'content-type': 'application/json' } });
  }

  /**
   * The server's info (batch limits, compression). When it cannot be had the Client's defaults
   * apply (an empty answer), instead of the Client retrying it before every batch; the batches
   * themselves then tell whether the store is reachable.
   */
  private async info(input: string | URL | Request, init: RequestInit): Promise<Response> {
    try {
      const response = await fetch(input, init);
      if (response.ok) return response;
      await response.arrayBuffer();
    } catch {
      // Reported by the batches that follow, if they fail too.
    }
    return new Response('{}', { status: 200, headers: { 'content-type': 'application/json' } });
  }

  private pump(): void {
    while (this.sending < this.options.concurrency && this.queue.length) {
      const next = this.queue.shift()!;
      this.sending += 1;
      void this.send(next).finally(() => {
        this.sending -= 1;
        this.bufferedBytes -= next.body.length;
        if (this.queue.length) this.pump();
        else if (this.sending === 0) this.idle?.();
      });
    }
  }

  private async send(pending: Pending): Promise<void> {
    const { attempts, retryDelayMs, requestTimeoutMs, clock } = this.options;
    let reason = '';
    for (let attempt = 1; attempt <= attempts; attempt += 1) {
      if (attempt > 1) await clock.sleep(retryDelayMs * 2 ** (attempt - 2));
      try {
        const response = await fetch(pending.url, {
          method: pending.method,
          headers: pending.headers,
          body: pending.body,
          signal: AbortSignal.timeout(requestTimeoutMs),
        });
        const text = await response.text();
        if (response.ok) {
          traceRequests.inc({ result: 'sent' });
          return;
        }
        reason = `${pending.method} ${new URL(pending.url).pathname} answered ${response.status}${text ? `: ${text.slice(0, 200)}` : ''}`;
        if (!RETRYABLE.has(response.status)) break;
      } catch (error) {
        const cause = (error as { cause?: { code?: string; message?: string } }).cause;
        reason = `${pending.method} ${pending.url} failed: ${cause?.code ?? cause?.message ?? (error as Error).message}`;
      }
    }
    this.drop(pending, reason);
  }

  private drop(pending: Pending, reason: string): void {
    const runs = runsIn(pending);
    traceRequests.inc({ result: 'dropped' });
    traceRunsDropped.inc(runs);
    this.dropped.runs += runs;
    this.dropped.reason = reason;
    this.warnTimer ??= this.options.clock.setTimeout(() => this.report(), this.options.warnIntervalMs);
  }

  /** One warning for the drops since the last one. */
  private report(): void {
    this.warnTimer?.cancel();
    this.warnTimer = undefined;
    if (!this.dropped.runs) return;
    this.log.warn(
      { droppedRuns: this.dropped.runs, reason: this.dropped.reason },
      `dropped the traces of ${this.dropped.runs} runs: the trace store could not take them`,
    );
    this.dropped = { runs: 0, reason: '' };
  }
}

/**
 * How many run records (creates and updates) a request carries: the `post.<id>` / `patch.<id>`
 * parts of a multipart body, the `post` and `patch` lists of a JSON batch, else one.
 */
function runsIn(pending: Pending): number {
  try {
    const encoding = pending.headers['content-encoding'];
    const body = encoding === 'gzip' ? gunzipSync(pending.body) : encoding ? undefined : pending.body;
    if (!body) return 1;
    if (pending.url.endsWith('/runs/multipart')) {
      const names = new Set([...body.toString('latin1').matchAll(/name="((?:post|patch)\.[^".]+)"/g)].map((m) => m[1]));
      return Math.max(1, names.size);
    }
    if (pending.url.endsWith('/runs/batch')) {
      const batch = JSON.parse(body.toString('utf8')) as { post?: unknown[]; patch?: unknown[] };
      return Math.max(1, (batch.post?.length ?? 0) + (batch.patch?.length ?? 0));
    }
  } catch {
    // A body that does not parse still counts as the run it carries at least.
  }
  return 1;
}
