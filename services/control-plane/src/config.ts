import type { GrpcServerConfig } from '@berth/config';

export interface ControlPlaneConfig extends GrpcServerConfig {
  /** Postgres holding the control plane's schema (`control_plane`). */
  databaseUrl: string;
  /**
   * Apply the control plane's migrations at start (under a lock, so many replicas may do it).
   * @default true
   */
  migrate?: boolean;
  /**
   * Lifetime of a login flow, in seconds.
   * @default 600
   */
  authFlowTtlSeconds?: number;
  /**
   * How often expired login flows are marked and old ones deleted, in milliseconds.
   * @default 60000
   */
  sweepIntervalMs?: number;
}
