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
   * The URL users reach the gateway at (e.g. behind an ingress), used in login approval links.
   * @default the origin of each request
   */
  publicUrl?: string;
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
   * Apply the gateway's migrations at start (under a lock, so many replicas may do it).
   * @default true
   */
  migrate?: boolean;
}
