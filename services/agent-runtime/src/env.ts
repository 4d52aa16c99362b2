/**
 * The agent-runtime's environment: the only place it reads process.env.
 * - the agent server of one deployed revision (BERTH_AGENT_CONFIG, DATABASE_URL, ...), see `serve.ts`;
 * - the init container that fetches a revision's artifact, see `fetch-artifact.ts`.
 */
import { envCidrList, envOptionalPort, envOptionalString, parseEnv } from '@berth/config';
import { z } from 'zod';
import type { AgentServerConfig } from './server.js';
import { parseHostLinks, type HostLink } from './host-links.js';
import { InvalidWebhookSecretError, webhookKey } from '@berth/agent-contract';

const serveSchema = z
  .object({
    /** The project's langgraph.json. */
    BERTH_AGENT_CONFIG: z.string().min(1),
    DATABASE_URL: z.string().min(1),
    /** Postgres schema of the deployment's threads, runs and checkpoints. */
    BERTH_AGENT_SCHEMA: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,47}$/)
      .default('agent'),
    REDIS_URL: z.string().min(1).optional(),
    HOST: z.string().min(1).default('127.0.0.1'),
    PORT: z.coerce.number().int().min(0).max(65535).default(8000),
    /** Runs executed at once by this process; 0 = API only (LangGraph's name for it). */
    N_JOBS_PER_WORKER: z.coerce.number().int().min(0).max(1000).default(10),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** The deployment's credential: requests without it (header x-berth-deployment-credential) get 401. */
    BERTH_DEPLOYMENT_CREDENTIAL: z.string().min(16).optional(),
    /** Exit when stdin closes: a deployer's child process goes down with its parent. */
    BERTH_EXIT_WITH_PARENT: z.enum(['0', '1']).default('0'),
    /** The trace API runs are traced to (the platform's gateway); unset: runs are not traced. */
    BERTH_TRACING_ENDPOINT: z.url({ protocol: /^https?$/ }).optional(),
    /** The deployment's tracing credential. */
    BERTH_TRACING_API_KEY: z.string().min(1).optional(),
    /** The tracing project (the deployment's name). */
    BERTH_TRACING_PROJECT: z.string().min(1).optional(),
    /** The deployment's webhook signing secret (`whsec_…`); unset: runs naming a webhook are refused. */
    BERTH_WEBHOOK_SECRET: envOptionalString.refine((secret) => secret === undefined || isWebhookSecret(secret), {
      message: new InvalidWebhookSecretError().message,
    }),
    /** Non-public CIDRs webhook receivers may be at (`127.0.0.0/8,::1` for `berth dev`); others are refused. */
    BERTH_WEBHOOK_PRIVATE_EGRESS: envCidrList,
    /** Per graph id, the system assistant's config and `context` (JSON, as the LangGraph.js server reads it). */
    LANGGRAPH_CONFIG: envOptionalString,
    /** In a container: the inherited descriptor of the listening socket the deployer bound (HOST:PORT names it). */
    BERTH_LISTEN_FD: z.coerce.number().int().min(3).optional(),
    /** In a container: loopback ports bridged to the host's Unix sockets, `port=/path,…` (see host-links.ts). */
    BERTH_HOST_LINKS: envOptionalString,
    /**
     * Port of the metrics listener (`GET /metrics`, Prometheus text format), apart from PORT, which the
     * gateway proxies to; unset: no metrics listener.
     */
    BERTH_METRICS_PORT: envOptionalPort,
    /** Interface of the metrics listener (`0.0.0.0` in a pod a Prometheus scrapes). */
    BERTH_METRICS_HOST: z.string().min(1).default('127.0.0.1'),
    /** In a container: the egress proxy (`http://127.0.0.1:port`) every `fetch` to a non-loopback host goes through. */
    BERTH_EGRESS_PROXY: z.url({ protocol: /^http$/ }).optional(),
  })
  .refine((e) => !e.BERTH_TRACING_ENDPOINT || (e.BERTH_TRACING_API_KEY && e.BERTH_TRACING_PROJECT), {
    path: ['BERTH_TRACING_ENDPOINT'],
    message: 'tracing needs BERTH_TRACING_API_KEY and BERTH_TRACING_PROJECT too',
  });

function isWebhookSecret(secret: string): boolean {
  try {
    webhookKey(secret);
    return true;
  } catch (error) {
    if (error instanceof InvalidWebhookSecretError) return false;
    throw error;
  }
}

export interface AgentServeConfig {
  server: AgentServerConfig;
  exitWithParent: boolean;
  /** What a container's agent server reaches through the host (see host-links.ts). */
  hostLinks: HostLink[];
  egressProxy?: string;
  logLevel: z.output<typeof serveSchema>['LOG_LEVEL'];
}

export function loadAgentServeConfig(env: Record<string, string | undefined> = process.env): AgentServeConfig {
  const e = parseEnv(serveSchema, env);
  return {
    server: {
      configPath: e.BERTH_AGENT_CONFIG,
      databaseUrl: e.DATABASE_URL,
      schema: e.BERTH_AGENT_SCHEMA,
      ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
      host: e.HOST,
      port: e.PORT,
      ...(e.BERTH_LISTEN_FD !== undefined ? { listenFd: e.BERTH_LISTEN_FD } : {}),
      workers: e.N_JOBS_PER_WORKER,
      // Secrets arrive as environment variables; a project env file is not part of a deployment.
      applyProjectEnv: false,
      ...(e.LANGGRAPH_CONFIG ? { langgraphConfig: e.LANGGRAPH_CONFIG } : {}),
      ...(e.BERTH_METRICS_PORT !== undefined ? { metrics: { host: e.BERTH_METRICS_HOST, port: e.BERTH_METRICS_PORT } } : {}),
      ...(e.BERTH_DEPLOYMENT_CREDENTIAL ? { deploymentCredential: e.BERTH_DEPLOYMENT_CREDENTIAL } : {}),
      ...(e.BERTH_TRACING_ENDPOINT
        ? { tracing: { endpoint: e.BERTH_TRACING_ENDPOINT, apiKey: e.BERTH_TRACING_API_KEY!, project: e.BERTH_TRACING_PROJECT! } }
        : {}),
      ...(e.BERTH_WEBHOOK_SECRET
        ? { webhooks: { secret: e.BERTH_WEBHOOK_SECRET, privateEgress: e.BERTH_WEBHOOK_PRIVATE_EGRESS, ...(e.BERTH_EGRESS_PROXY ? { proxied: true } : {}) } }
        : {}),
    },
    logLevel: e.LOG_LEVEL,
    exitWithParent: e.BERTH_EXIT_WITH_PARENT === '1',
    hostLinks: parseHostLinks(e.BERTH_HOST_LINKS ?? ''),
    ...(e.BERTH_EGRESS_PROXY ? { egressProxy: e.BERTH_EGRESS_PROXY } : {}),
  };
}

const fetchArtifactSchema = z.object({
  /** The control plane's artifact endpoint for this revision. */
  BERTH_ARTIFACT_URL: z.url({ protocol: /^https?$/ }),
  /** The revision's artifact credential (from the deployment's Secret). */
  BERTH_ARTIFACT_CREDENTIAL: z.string().min(16),
  /** Hex SHA-256 the archive was recorded with. */
  BERTH_ARTIFACT_SHA256: z.string().regex(/^[0-9a-fA-F]{64}$/, 'a hex SHA-256 (64 characters)'),
  /** Where to unpack it: the volume the agent server's container serves. */
  BERTH_ARTIFACT_DIR: z.string().min(1).default('/srv/project'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

/** The init container's settings (`fetch-artifact.js`). */
export function loadArtifactFetchConfig(env: Record<string, string | undefined> = process.env) {
  const e = parseEnv(fetchArtifactSchema, env);
  return {
    url: e.BERTH_ARTIFACT_URL,
    credential: e.BERTH_ARTIFACT_CREDENTIAL,
    sha256: e.BERTH_ARTIFACT_SHA256,
    dir: e.BERTH_ARTIFACT_DIR,
    logLevel: e.LOG_LEVEL,
  };
}
