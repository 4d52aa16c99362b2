/**
 * Environment parsing for Berth services. Each service declares one zod schema in its own
 * `src/env.ts`; that file is the only code that reads `process.env` and hands the record to
 * {@link parseEnv}.
 */
import { InvalidCidrError, parseCidr } from '@berth/egress';
import type { TracingConfig } from '@berth/tracing';
import { z } from 'zod';

/** A service's environment did not match its schema. Lists every offending variable. */
export class ConfigError extends Error {
  readonly problems: string[];

  constructor(problems: string[], options?: { cause?: unknown }) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`, options);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

/** Parses an environment record against a schema, throwing {@link ConfigError} with one line per bad variable. */
export function parseEnv<S extends z.ZodType>(schema: S, env: Record<string, string | undefined>): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  throw new ConfigError(
    result.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`),
    { cause: result.error },
  );
}

/** `true`/`false`/`1`/`0`/`yes`/`no` (any case) as a boolean. */
export const envBoolean = z
  .enum(['true', 'false', '1', '0', 'yes', 'no', 'TRUE', 'FALSE', 'True', 'False', 'YES', 'NO'])
  .transform((v) => ['true', '1', 'yes'].includes(v.toLowerCase()));

/** A TCP port; `0` asks the OS for a free one. */
export const envPort = z.coerce.number().int().min(0).max(65535);

/** A log level understood by pino. */
export const envLogLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** Optional string where an empty value counts as unset (shells often export `VAR=`). */
export const envOptionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v === '' ? undefined : v));

/** An optional TCP port where an empty value counts as unset (not as port 0). */
export const envOptionalPort = z.preprocess((value) => (value === '' ? undefined : value), envPort.optional());

/** A comma-separated list (`a, b,c`); unset or empty is an empty list. */
export const envList = z
  .string()
  .optional()
  .transform((text) =>
    (text ?? '')
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean),
  );

/** `10.0.0.0/8,192.168.1.5/32`: each a valid CIDR (or a bare IP address). */
export const envCidrList = envList.refine(
  (items) =>
    items.every((item) => {
      try {
        parseCidr(item);
        return true;
      } catch (error) {
        if (error instanceof InvalidCidrError) return false;
        throw error;
      }
    }),
  { message: 'a comma-separated list of CIDRs such as 10.0.0.0/8,127.0.0.1/32' },
);

/** Copy of a config with the named keys replaced, so a config can be logged without its secrets. */
export function redact<T extends Record<string, unknown>>(config: T, secretKeys: readonly (keyof T)[]): T {
  const copy: Record<string, unknown> = { ...config };
  for (const key of secretKeys) if (copy[key as string] !== undefined) copy[key as string] = '[redacted]';
  for (const [key, value] of Object.entries(copy)) {
    // Connection strings carry passwords: hide the password part wherever one appears.
    if (typeof value === 'string') copy[key] = value.replace(/(\/\/[^:/@]+:)[^@]+@/, '$1****@');
  }
  return copy as T;
}

/** Settings every internal gRPC service reads: where to listen, how much to log, which callers to serve. */
export interface GrpcServerConfig {
  /** @default '127.0.0.1' */
  grpcHost: string;
  /** 0 picks a free port. @default 50051 */
  grpcPort: number;
  /** @default 'info' */
  logLevel: z.output<typeof envLogLevel>;
  /**
   * The token every gRPC call must carry (`authorization: Bearer <token>`); health checks excepted.
   * @default none: calls are served unauthenticated — for tests and development only
   */
  internalToken?: string;
}

const grpcServerEnv = z.object({
  GRPC_HOST: z.string().default('127.0.0.1'),
  GRPC_PORT: envPort.default(50051),
  LOG_LEVEL: envLogLevel.default('info'),
  BERTH_INTERNAL_TOKEN: envOptionalString,
});

/** Reads GRPC_HOST, GRPC_PORT, LOG_LEVEL and BERTH_INTERNAL_TOKEN. */
export function parseGrpcServerEnv(env: Record<string, string | undefined>): GrpcServerConfig {
  const e = parseEnv(grpcServerEnv, env);
  return {
    grpcHost: e.GRPC_HOST,
    grpcPort: e.GRPC_PORT,
    logLevel: e.LOG_LEVEL,
    ...(e.BERTH_INTERNAL_TOKEN ? { internalToken: e.BERTH_INTERNAL_TOKEN } : {}),
  };
}

/** `key=value,…` (values URL-encoded, as the OpenTelemetry spec has it). */
const envHeaders = envList
  .refine((items) => items.every((item) => /^[^=\s]+=./.test(item)), { message: 'a comma-separated list of key=value pairs' })
  .transform((items) =>
    Object.fromEntries(items.map((item) => [item.slice(0, item.indexOf('=')).trim(), decodeURIComponent(item.slice(item.indexOf('=') + 1).trim())])),
  );

/**
 * The platform's own tracing, from the standard OpenTelemetry variables. Every service's env reads
 * them through this one schema (docs/operate/monitor.md).
 */
export const tracingEnv = z.object({
  /** OTLP/HTTP traces URL of a collector (`http://collector:4318/v1/traces`); set, the service exports its spans there. Overrides OTEL_EXPORTER_OTLP_ENDPOINT. */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  /** OTLP/HTTP base URL of a collector (`http://collector:4318`); traces go to its `/v1/traces`. Unset (and no traces endpoint): tracing is off. */
  OTEL_EXPORTER_OTLP_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  /** Headers sent with every export (`authorization=Bearer%20…,x-tenant=ops`), e.g. a collector's credentials. */
  OTEL_EXPORTER_OTLP_HEADERS: envHeaders,
});

/** Reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_HEADERS. */
export function parseTracingEnv(env: Record<string, string | undefined>): TracingConfig {
  const e = parseEnv(tracingEnv, {
    ...env,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] || undefined,
    OTEL_EXPORTER_OTLP_ENDPOINT: env['OTEL_EXPORTER_OTLP_ENDPOINT'] || undefined,
  });
  const endpoint =
    e.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (e.OTEL_EXPORTER_OTLP_ENDPOINT ? `${e.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (endpoint === undefined) return {};
  return { otlpTracesEndpoint: endpoint, ...(Object.keys(e.OTEL_EXPORTER_OTLP_HEADERS).length > 0 ? { otlpHeaders: e.OTEL_EXPORTER_OTLP_HEADERS } : {}) };
}
