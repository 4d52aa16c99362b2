/**
 * The gateway's environment: the only place its settings are read from process.env.
 */
import { envLogLevel, envOptionalPort, envOptionalString, envPort, parseEnv } from '@berth/config';
import { selectQueueBackend } from '@berth/queue';
import { z } from 'zod';
import type { GatewayConfig } from './config.js';

const schema = z.object({
  /** Postgres holding the gateway schema (tenants, API keys, tokens). */
  DATABASE_URL: z.string().min(1),
  /** Interface to listen on. */
  GATEWAY_HOST: z.string().default('127.0.0.1'),
  /** HTTP port; 0 picks a free one. */
  GATEWAY_PORT: envPort.default(8080),
  LOG_LEVEL: envLogLevel.default('info'),
  /** Redis for queues and run events (production); unset = BullMQ's Postgres backend on DATABASE_URL. */
  REDIS_URL: envOptionalString,
  /**
   * The URL users reach the platform at (e.g. behind an ingress), for every link the gateway hands out;
   * default: the gateway's own listening address. Never taken from a request's Host header.
   */
  BERTH_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  /**
   * Origins (`https://console.example.com`, comma-separated; `*` for any) whose pages may call the
   * gateway's own API (/v1, /v2, /api, ...) from a browser. The gateway's public origin is always
   * allowed. Deployment URLs follow each deployment's `http.cors` instead.
   */
  GATEWAY_CORS_ALLOW_ORIGINS: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(',')
        .map((o) => o.trim().replace(/\/+$/, ''))
        .filter(Boolean),
    )
    .pipe(
      z.array(
        z.union([
          z.literal('*'),
          z.url({ protocol: /^https?$/ }).refine((o) => URL.canParse(o) && new URL(o).origin === o, 'must be an origin: scheme://host[:port], no path'),
        ]),
      ),
    ),
  /** Lifetime of the bearer tokens `berth login` receives, in seconds (1 minute to 30 days). */
  LOGIN_TOKEN_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(30 * 24 * 3600)
    .default(30 * 24 * 3600),
  // The defaults of the CONSOLE_SESSION* settings are @berth/auth's DEFAULT_SESSION_LIMITS (a test keeps them equal).
  /** Seconds a console session (the `berth_session` cookie) lives without a request (1 minute to 1 day). */
  CONSOLE_SESSION_IDLE_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .max(24 * 3600)
    .default(3600),
  /** Seconds a console session lives at most, however active (5 minutes to 30 days). */
  CONSOLE_SESSION_MAX_SECONDS: z.coerce
    .number()
    .int()
    .min(300)
    .max(30 * 24 * 3600)
    .default(12 * 3600),
  /** Live console sessions one API key may hold (1 to 1000); signing in beyond it ends the key's oldest session. */
  CONSOLE_SESSIONS_PER_KEY: z.coerce.number().int().min(1).max(1000).default(10),
  /** gRPC addresses (host:port) of the internal services that /readyz checks. */
  CONTROL_PLANE_GRPC_ADDRESS: z.string().optional(),
  SANDBOX_MANAGER_GRPC_ADDRESS: z.string().optional(),
  EXPORT_WORKER_GRPC_ADDRESS: z.string().optional(),
  /** The token the internal services expect on every gRPC call (the same value they are given). */
  BERTH_INTERNAL_TOKEN: envOptionalString,
  /**
   * Port of the metrics listener (`GET /metrics`, Prometheus text format; 0 picks a free one), apart
   * from the public port; unset: no metrics listener. In `berth up` it has the whole platform's metrics.
   */
  BERTH_METRICS_PORT: envOptionalPort,
  /** Interface of the metrics listener: loopback unless a scraper on another host needs it (`0.0.0.0` in a pod). */
  BERTH_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
});

export function loadGatewayConfig(env: Record<string, string | undefined> = process.env): GatewayConfig {
  const e = parseEnv(schema, env);
  const services: Record<string, string> = {};
  if (e.CONTROL_PLANE_GRPC_ADDRESS) services['control-plane'] = e.CONTROL_PLANE_GRPC_ADDRESS;
  if (e.SANDBOX_MANAGER_GRPC_ADDRESS) services['sandbox-manager'] = e.SANDBOX_MANAGER_GRPC_ADDRESS;
  if (e.EXPORT_WORKER_GRPC_ADDRESS) services['export-worker'] = e.EXPORT_WORKER_GRPC_ADDRESS;
  return {
    databaseUrl: e.DATABASE_URL,
    host: e.GATEWAY_HOST,
    port: e.GATEWAY_PORT,
    logLevel: e.LOG_LEVEL,
    queue: selectQueueBackend({ databaseUrl: e.DATABASE_URL, ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}) }),
    services,
    ...(e.BERTH_INTERNAL_TOKEN ? { internalToken: e.BERTH_INTERNAL_TOKEN } : {}),
    ...(e.BERTH_METRICS_PORT !== undefined ? { metrics: { host: e.BERTH_METRICS_HOST, port: e.BERTH_METRICS_PORT } } : {}),
    ...(e.BERTH_PUBLIC_URL ? { publicUrl: e.BERTH_PUBLIC_URL } : {}),
    loginTokenTtlSeconds: e.LOGIN_TOKEN_TTL_SECONDS,
    corsAllowOrigins: e.GATEWAY_CORS_ALLOW_ORIGINS,
    consoleSessions: {
      idleSeconds: e.CONSOLE_SESSION_IDLE_SECONDS,
      maxSeconds: e.CONSOLE_SESSION_MAX_SECONDS,
      perKey: e.CONSOLE_SESSIONS_PER_KEY,
    },
  };
}
