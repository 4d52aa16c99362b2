import type { SessionLimits } from '@berth/auth';
import type { Clock } from '@berth/clock';
import type { QueueBackendConfig } from '@berth/queue';

export interface GatewayConfig {
  /** Postgres holding the gateway schema. */
  databaseUrl: string;
  /** @default '127.0.0.1' */
  host: string;
  /** 0 picks a free port. */
  port: number;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** The platform's queue backend, which /readyz checks (Redis in production, else Postgres). */
  queue: QueueBackendConfig;
  /** Internal services (name → gRPC host:port) that /readyz checks. */
  services: Record<string, string>;
  /**
   * The token the internal services expect on every gRPC call (`BERTH_INTERNAL_TOKEN`).
   * @default none — only for services that run without one (tests, development)
   */
  internalToken?: string;
  /**
   * The URL users reach the platform at (`BERTH_PUBLIC_URL`, e.g. behind an ingress): the base of
   * login approval links and deployment URLs, and the X-Forwarded-Host/-Proto agent servers see.
   * Request headers (Host, X-Forwarded-*) are never used for these: a client chooses them.
   * @default the gateway's own listening address (the one each connection reached)
   */
  publicUrl?: string;
  /**
   * Origins whose pages may call the gateway's own API from a browser (`GATEWAY_CORS_ALLOW_ORIGINS`;
   * `*` for any; never with credentials: the API takes header credentials only). The public
   * origin (publicUrl's, else the gateway's own address) is always allowed.
   * @default [] (the public origin only)
   */
  corsAllowOrigins?: string[];
  /**
   * Lifetime of the bearer tokens `berth login` receives, in seconds.
   * @default 2592000 (30 days)
   */
  loginTokenTtlSeconds?: number;
  /**
   * Login flows one client address may start per minute (`POST /v2/auth/login`); approval
   * attempts are limited to the same number.
   * @default 20
   */
  loginRateLimit?: number;
  /**
   * Console sessions (`POST /v1/auth/session`): idle and absolute lifetime, live sessions per API
   * key (CONSOLE_SESSION_IDLE_SECONDS, CONSOLE_SESSION_MAX_SECONDS, CONSOLE_SESSIONS_PER_KEY).
   * @default { idleSeconds: 3600, maxSeconds: 43200, perKey: 10 }
   */
  consoleSessions?: Partial<SessionLimits>;
  /**
   * The gateway's clock: console sessions expire on it, the deployment cache's entries too, and log streams' heartbeats
   * run on it (tests pass a ManualClock).
   * @default systemClock
   */
  clock?: Clock;
  /**
   * Serve the process's metrics (`GET /metrics`) on this address, a listener of its own: never on
   * the public port, where tenants' traffic arrives.
   * @default none: no metrics listener
   */
  metrics?: { host: string; port: number };
  /**
   * Apply the gateway's migrations at start (under a lock, so many replicas may do it).
   * @default true
   */
  migrate?: boolean;
}
