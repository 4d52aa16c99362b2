/**
 * Login flows: start, describe, complete, and wait for completion. The wait is a loop of
 * "register for a notification, read the flow (one short statement), sleep until notified or a
 * timer fires" — no database connection is held while sleeping.
 */
import { systemClock, type Clock } from '@berth/clock';
import { InvalidArgumentError, NotFoundError } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { FlowNotifier } from './notifier.js';
import { digestId } from './secrets.js';
import { isUuid } from '@berth/ids';
import type { AuthFlowStore, FlowRecord } from './store.js';

export interface AuthFlowsOptions {
  /**
   * Lifetime of a flow when the caller does not choose one, in seconds.
   * @default 600
   */
  defaultTtlSeconds?: number;
  /**
   * Longest wait accepted, in milliseconds.
   * @default 600000
   */
  maxWaitMs?: number;
  /**
   * A waiter re-reads its flow at least this often, in case a notification was lost (e.g. while
   * the LISTEN connection reconnected).
   * @default 5000
   */
  recheckMs?: number;
  /** The time waits end by (the notifier's timers should be on the same clock). @default systemClock */
  clock?: Clock;
}

export type WaitOutcome = { status: 'completed'; token?: string } | { status: 'pending' | 'timeout' | 'not_found' };

export const MAX_TTL_SECONDS = 3600;
const MAX_CLIENT_NAME = 200;
const MAX_TOKEN_LENGTH = 1024;
// When the database says "still pending" right at the expiry instant (clocks a hair apart), look
// again shortly instead of spinning.
const MIN_RECHECK_MS = 25;

export class AuthFlows {
  private readonly defaultTtlSeconds: number;
  private readonly maxWaitMs: number;
  private readonly recheckMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly store: AuthFlowStore,
    private readonly notifier: FlowNotifier,
    private readonly log: Logger,
    options: AuthFlowsOptions = {},
  ) {
    this.defaultTtlSeconds = options.defaultTtlSeconds ?? 600;
    this.maxWaitMs = options.maxWaitMs ?? 600_000;
    this.recheckMs = options.recheckMs ?? 5000;
    this.clock = options.clock ?? systemClock;
  }

  async start(input: { ttlSeconds?: number; clientName?: string }): Promise<{ authId: string; approvalId: string; flow: FlowRecord }> {
    const ttlSeconds = input.ttlSeconds || this.defaultTtlSeconds;
    if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_TTL_SECONDS) {
      throw new InvalidArgumentError(`ttl_seconds must be an integer from 1 to ${MAX_TTL_SECONDS}`);
    }
    // Control characters have no business in a label shown on a web page.
    const clientName = (input.clientName ?? '').replace(/\p{Cc}/gu, ' ').trim();
    if (clientName.length > MAX_CLIENT_NAME) throw new InvalidArgumentError(`client_name must be at most ${MAX_CLIENT_NAME} characters`);
    const started = await this.store.create({ ttlSeconds, clientName });
    this.log.info({ expiresAt: started.flow.expiresAt }, 'login flow started');
    return started;
  }

  async get(id: { authId: string } | { approvalId: string }): Promise<FlowRecord> {
    const flow = 'authId' in id ? await this.store.getByAuthId(id.authId) : await this.store.getByApprovalId(id.approvalId);
    if (!flow) throw new NotFoundError('Login flow not found');
    return flow;
  }

  async complete(input: { approvalId: string; token: string; tenantId: string }): Promise<FlowRecord> {
    if (!input.token || input.token.length > MAX_TOKEN_LENGTH) throw new InvalidArgumentError('token must be 1 to 1024 characters');
    if (input.tenantId && !isUuid(input.tenantId)) throw new InvalidArgumentError('tenant_id must be a UUID');
    const flow = await this.store.complete({ approvalId: input.approvalId, token: input.token, tenantId: input.tenantId || null });
    this.log.info({ tenantId: flow.tenantId }, 'login flow completed');
    return flow;
  }

  /**
   * Waits up to `timeoutMs` for the flow to complete. `completed` carries the token to the first
   * waiter only; `not_found` for unknown or expired flows (a wait ends when its flow expires);
   * `timeout` when the whole time passed; `pending` when it ended early (timeout 0, the caller
   * went away, or this service is closing).
   */
  async wait(authId: string, timeoutMs: number, signal?: AbortSignal): Promise<WaitOutcome> {
    if (!Number.isInteger(timeoutMs) || timeoutMs < 0 || timeoutMs > this.maxWaitMs) {
      throw new InvalidArgumentError(`timeout_ms must be an integer from 0 to ${this.maxWaitMs}`);
    }
    const deadline = this.clock.now() + timeoutMs;
    // Subscribed before the first read, so a completion committed in between still wakes us.
    const subscription = this.notifier.subscribe(digestId(authId).toString('hex'), signal);
    try {
      for (;;) {
        const state = await this.store.claim(authId);
        if (state.kind === 'token') return { status: 'completed', token: state.token };
        if (state.kind === 'claimed') return { status: 'completed' };
        if (state.kind === 'missing') return { status: 'not_found' };
        const now = this.clock.now();
        if (timeoutMs === 0) return { status: 'pending' };
        if (now >= deadline) return { status: 'timeout' };
        // Sleep until notified, the deadline, the flow's expiry (then answer not_found), or the
        // periodic re-check.
        const ms = Math.max(MIN_RECHECK_MS, Math.min(deadline - now, state.expiresAt.getTime() - now, this.recheckMs));
        const reason = await subscription.next(ms);
        if (reason === 'closed' || reason === 'aborted') return { status: 'pending' };
      }
    } finally {
      subscription.close();
    }
  }
}
