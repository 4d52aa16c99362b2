/**
 * The control-plane's environment (DATABASE_URL, GRPC_HOST, GRPC_PORT, LOG_LEVEL, BERTH_INTERNAL_TOKEN,
 * AUTH_FLOW_TTL_SECONDS, BERTH_SECRET_KEY, BERTH_ARTIFACTS_DIR, BERTH_DEPLOYER, ...): the only place
 * it reads process.env.
 */
import { envCidrList, parseEnv, parseGrpcServerEnv } from '@berth/config';
import { z } from 'zod';
import type { ControlPlaneConfig } from './config.js';

const schema = z.object({
  /** Postgres holding the control_plane schema. */
  DATABASE_URL: z.string().min(1),
  /** Lifetime of a login flow (berth login), in seconds. */
  AUTH_FLOW_TTL_SECONDS: z.coerce.number().int().min(60).max(3600).default(600),
  /** 32 bytes, base64: encrypts deployment secrets at rest. Without it no deployments are served. */
  BERTH_SECRET_KEY: z.string().min(1).optional(),
  /** Where revisions are built. */
  BERTH_ARTIFACTS_DIR: z.string().min(1).default('/var/lib/berth/artifacts'),
  /** local (child processes) or kubernetes (in-cluster: the pod's service account). */
  BERTH_DEPLOYER: z.enum(['local', 'kubernetes']).default('local'),
  KUBERNETES_NAMESPACE: z.string().min(1).default('berth'),
  REDIS_URL: z.string().min(1).optional(),
  /** Seconds a finished upload no revision uses is kept (from its start). */
  UNUSED_UPLOAD_TTL_SECONDS: z.coerce.number().int().min(1).default(3600),
  /** Postgres of the agent servers (defaults to DATABASE_URL). */
  AGENT_DATABASE_URL: z.string().min(1).optional(),
  /** The gateway's URL as agent servers reach it (e.g. its Service): where they send their traces. Unset: no tracing. */
  BERTH_TRACING_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
  /** Private CIDRs deployed agent servers may send run webhooks to. */
  BERTH_WEBHOOK_PRIVATE_EGRESS: envCidrList,
  PATH: z.string().default('/usr/local/bin:/usr/bin:/bin'),
  HOME: z.string().default('/tmp'),
});

export function loadControlPlaneConfig(env: Record<string, string | undefined> = process.env): ControlPlaneConfig {
  const e = parseEnv(schema, env);
  const grpc = parseGrpcServerEnv(env);
  return {
    ...grpc,
    databaseUrl: e.DATABASE_URL,
    authFlowTtlSeconds: e.AUTH_FLOW_TTL_SECONDS,
    ...(e.BERTH_SECRET_KEY
      ? {
          deployments: {
            secretKey: e.BERTH_SECRET_KEY,
            artifactsDir: e.BERTH_ARTIFACTS_DIR,
            deployer: e.BERTH_DEPLOYER === 'kubernetes' ? { kind: 'kubernetes', namespace: e.KUBERNETES_NAMESPACE } : { kind: 'local' },
            ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
            ...(e.AGENT_DATABASE_URL ? { agentDatabaseUrl: e.AGENT_DATABASE_URL } : {}),
            processEnv: { PATH: e.PATH, HOME: e.HOME },
            agentLogLevel: grpc.logLevel,
            ...(e.BERTH_TRACING_ENDPOINT ? { tracingEndpoint: e.BERTH_TRACING_ENDPOINT } : {}),
            ...(e.BERTH_WEBHOOK_PRIVATE_EGRESS.length ? { webhookPrivateEgress: e.BERTH_WEBHOOK_PRIVATE_EGRESS } : {}),
            unusedUploadTtlSeconds: e.UNUSED_UPLOAD_TTL_SECONDS,
          },
        }
      : {}),
  };
}
