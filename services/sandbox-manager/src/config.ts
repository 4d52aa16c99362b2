/** What `start(config)` of the sandbox-manager takes (env.ts builds it from the environment). */
import type { Clock } from '@berth/clock';
import type { GrpcServerConfig } from '@berth/config';
import type { DriverConfig } from './drivers/build-driver.js';
import type { SandboxDriver } from './drivers/driver.js';
import type { ExecDefaults } from './exec/sessions.js';
import type { SandboxLimits } from './sandboxes/limits.js';
import type { SandboxQuota } from './sandboxes/quota.js';
import type { SandboxDefaults } from './sandboxes/sandboxes.js';

export interface SandboxSettings {
  /** Where sandboxes run; without one every sandbox call answers 503 with `unavailableReason`. */
  driver?: DriverConfig;
  /** A driver made by the caller instead (tests); it wins over `driver`. */
  driverInstance?: SandboxDriver;
  /**
   * Why sandboxes are off when no driver is given (shown to users in the 503).
   * @default a sentence on enabling the container driver
   */
  unavailableReason?: string;
  /** Private CIDRs sandboxes may reach through the auth proxy (`BERTH_SANDBOX_PRIVATE_EGRESS`). */
  privateEgress?: string[];
  /** Image of sandboxes created without a snapshot or template. */
  defaultImage?: string;
  /** Registries always pulled over plain HTTP (a registry on loopback). */
  insecureRegistries?: string[];
  defaults?: Partial<SandboxDefaults>;
  /** Defaults and maxima of one sandbox's resources. @default DEFAULT_LIMITS */
  limits?: Partial<SandboxLimits>;
  /** What one tenant's sandboxes may use together. @default DEFAULT_QUOTA */
  quota?: Partial<SandboxQuota>;
  exec?: Partial<ExecDefaults>;
  /** @default 5000 */
  reaperIntervalMs?: number;
  /** How often the engine is checked (readiness, and 503s while it is down). @default 2000 */
  engineCheckIntervalMs?: number;
  /** How often containers without a live record are looked for. @default 30000 */
  reconcileIntervalMs?: number;
  /**
   * How long a container of this platform without any record is left alone before it is removed
   * (it must be seen that long apart, twice): room for a record on its way.
   * @default 30000
   */
  reconcileGraceMs?: number;
  /** @default 2000 */
  poolIntervalMs?: number;
  /**
   * Run the reaper, the pool keeper, the engine check and the reconciler (tests drive them by hand
   * with false). @default true
   */
  background?: boolean;
  /**
   * On close, stop every ready sandbox (files kept; the next command starts it again) and remove
   * the warm pools' members (refilled on the next start): for the embedded platform, whose engine
   * stops with it. Off where sandboxes outlive a manager restart (Kubernetes, several replicas).
   * @default false
   */
  stopSandboxesOnClose?: boolean;
  /**
   * The manager's time and timers: sandbox TTLs and idle stops, the reaper, the reconciler, the
   * warm pools' keeper, the engine check, commands' deadlines and idle timeouts (tests pass a
   * ManualClock and move time by hand).
   * @default systemClock
   */
  clock?: Clock;
}

export interface SandboxManagerConfig extends GrpcServerConfig {
  databaseUrl: string;
  /** The platform key (base64, 32 bytes): seals registry passwords and opaque proxy header values. */
  secretKey: string;
  /** @default true */
  migrate?: boolean;
  sandboxes?: SandboxSettings;
}

export const NO_DRIVER_REASON =
  'sandboxes are not enabled on this platform: start it with a container engine (Docker, or Podman with `podman system service`) and set SANDBOX_DOCKER_SOCKET, or configure the kubernetes driver';
