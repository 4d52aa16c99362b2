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
   * Apply the gateway's migrations at start (under a lock, so many replicas may do it).
   * @default true
   */
  migrate?: boolean;
}
