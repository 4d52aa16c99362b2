/**
 * Where a deployment's traffic goes, cached briefly per deployment id: every proxied request
 * needs the answer, and asking the control plane each time would add a gRPC round trip (and a
 * database query) to every agent-server call. Answers live `ttlMs` (1 s by default), so a
 * redeploy or a deletion takes effect within about a second; concurrent misses for one id share
 * one call (no stampede on the control plane when a popular entry expires).
 */
import { systemClock, type Clock } from '@berth/clock';
import { NotFoundError } from '@berth/errors';
import type { DeploymentStatus } from '@berth/proto';

export interface ResolvedDeployment {
  tenantId: string;
  /** Base URL of the serving revision's agent server; empty when none serves. */
  upstreamUrl: string;
  /** The project authenticates requests itself (langgraph.json `auth.path`). */
  customAuth: boolean;
  /** The serving revision's own credential, sent upstream as `x-berth-deployment-credential`; empty for none. */
  upstreamCredential: string;
  /** What to answer when nothing serves: UNHEALTHY (restarting), AWAITING_DEPLOY (on its way) or FAILED (nothing will until a new revision deploys). */
  status: DeploymentStatus;
  /** Why the deployment has its status (for its tenant); empty while READY or AWAITING_DEPLOY. */
  statusMessage: string;
  /** The credential its agent servers trace with (see trace-auth.ts). */
  tracingCredential: string;
  /** Its name and its tracing project's id (the project is named after it). */
  name: string;
  sessionId: string;
}

/** Asks the control plane; throws NotFoundError for an unknown (or deleted) deployment. */
export type ResolveFn = (deploymentId: string) => Promise<ResolvedDeployment>;

export interface DeploymentResolverOptions {
  /**
   * How long an answer (also "not found") is reused, in milliseconds.
   * @default 1000
   */
  ttlMs?: number;
  /**
   * Entries kept at most; beyond it, expired entries are dropped, then the oldest.
   * @default 10000
   */
  maxEntries?: number;
  /** The time answers expire by. @default systemClock */
  clock?: Clock;
}

interface Entry {
  /** `undefined`: the deployment does not exist. */
  value: ResolvedDeployment | undefined;
  expiresAt: number;
}

export class DeploymentResolver {
  private readonly entries = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<ResolvedDeployment | undefined>>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly clock: Clock;

  constructor(
    private readonly resolveFn: ResolveFn,
    options: DeploymentResolverOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 1000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.clock = options.clock ?? systemClock;
  }

  /**
   * The deployment's routing, or `undefined` when it does not exist. Other failures (the control
   * plane is unavailable) are thrown to every caller waiting on that lookup and not cached.
   */
  async resolve(deploymentId: string): Promise<ResolvedDeployment | undefined> {
    const cached = this.entries.get(deploymentId);
    if (cached && cached.expiresAt > this.clock.now()) return cached.value;
    const pending = this.inFlight.get(deploymentId);
    if (pending) return pending;
    const lookup = this.lookup(deploymentId).finally(() => this.inFlight.delete(deploymentId));
    this.inFlight.set(deploymentId, lookup);
    return lookup;
  }

  /** Forgets every answer (tests; or a caller that knows routing changed). */
  clear(): void {
    this.entries.clear();
  }

  private async lookup(deploymentId: string): Promise<ResolvedDeployment | undefined> {
    let value: ResolvedDeployment | undefined;
    try {
      value = await this.resolveFn(deploymentId);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
      value = undefined;
    }
    this.remember(deploymentId, value);
    return value;
  }

  private remember(deploymentId: string, value: ResolvedDeployment | undefined): void {
    this.entries.delete(deploymentId); // re-inserted last, so Map order is oldest-first
    if (this.entries.size >= this.maxEntries) this.evict();
    this.entries.set(deploymentId, { value, expiresAt: this.clock.now() + this.ttlMs });
  }

  private evict(): void {
    const now = this.clock.now();
    for (const [id, entry] of this.entries) if (entry.expiresAt <= now) this.entries.delete(id);
    for (const id of this.entries.keys()) {
      if (this.entries.size < this.maxEntries) break;
      this.entries.delete(id);
    }
  }
}
