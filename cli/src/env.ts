/**
 * The CLI's environment: the only place the CLI reads process.env.
 */
import { envLogLevel, envOptionalString, envPort, parseEnv } from '@berth/config';
import { homedir } from 'node:os';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';

const schema = z.object({
  /** Folder for the embedded stack's state (Postgres data, credentials, logs). */
  BERTH_STATE_DIR: envOptionalString,
  /** Preferred gateway port for `berth up`; a free port is used when it is taken. */
  BERTH_PORT: envPort.optional(),
  /** Interface the platform listens on. */
  BERTH_HOST: z.string().default('127.0.0.1'),
  /** The URL users reach the platform at (behind a proxy or ingress): the base of the links the gateway hands out. */
  BERTH_PUBLIC_URL: z.url({ protocol: /^https?$/ }).optional(),
  /** Use this Postgres instead of provisioning one under the state folder. */
  DATABASE_URL: envOptionalString,
  /** Run queues (and later the run event broker) on Redis instead of Postgres: the production mode. */
  REDIS_URL: envOptionalString,
  /** With REDIS_URL: `acl`, agent servers use it as Redis users of their own; `off`, they stay on Postgres. */
  BERTH_AGENT_REDIS: z.enum(['acl', 'off']).default('acl'),
  LOG_LEVEL: envLogLevel.default('info'),
  /** Where `berth login` keeps its credentials: $XDG_CONFIG_HOME/berth (default ~/.config/berth). */
  XDG_CONFIG_HOME: envOptionalString,
  HOME: envOptionalString,
  /** Credentials for commands that call the gateway (override `berth login` and .berth/credentials.json). */
  BERTH_API_KEY: envOptionalString,
  BERTH_HOST_URL: envOptionalString,
  BERTH_TENANT_ID: envOptionalString,
  /** The developer's own tracing settings: `berth dev` leaves tracing to them when any is set. */
  LANGSMITH_TRACING: envOptionalString,
  LANGSMITH_ENDPOINT: envOptionalString,
  LANGCHAIN_TRACING_V2: envOptionalString,
  LANGCHAIN_ENDPOINT: envOptionalString,
  /** Where a forked `berth dev` process traces (set by `berth dev` for its processes). */
  BERTH_TRACING_ENDPOINT: envOptionalString,
  BERTH_TRACING_API_KEY: envOptionalString,
  BERTH_TRACING_PROJECT: envOptionalString,
  /** Per graph id, the system assistant's config and `context` (JSON), for `berth dev`'s agent server. */
  LANGGRAPH_CONFIG: envOptionalString,
  /** The signing secret of a forked `berth dev` process's webhooks (set by `berth dev` from .berth/webhook-secret). */
  BERTH_WEBHOOK_SECRET: envOptionalString,
  /** `off`: the platform starts no container engine and sandbox calls answer 503. */
  BERTH_SANDBOXES: z.enum(['on', 'off']).default('on'),
  /**
   * Set by the supervisor of `berth up` for the platform it starts: the sandbox engine it runs, or
   * why there is none (JSON, parsed where the platform starts).
   */
  BERTH_SUPERVISED_SANDBOXES: envOptionalString,
  /**
   * `berth serve --service <grpc service>`: where its HTTP `/healthz` and `/readyz` listener binds
   * (`0.0.0.0` in a pod, for the kubelet's probes).
   */
  BERTH_HEALTH_HOST: z.string().default('127.0.0.1'),
  BERTH_HEALTH_PORT: envPort.default(8081),
});

export type CliEnv = z.output<typeof schema> & {
  stateDir: string;
  /**
   * The state folder of the Berth checkout this CLI runs from (`make up` there), whose platform
   * commands fall back to when `stateDir` has none — so that an installed `berth` (`make install`)
   * finds it from any folder. Unset when BERTH_STATE_DIR is set or it is `stateDir` itself.
   */
  checkoutStateDir: string | undefined;
  /** The user's Berth config folder: `$XDG_CONFIG_HOME/berth` or `~/.config/berth`. */
  configDir: string;
  /** The credentials `berth login` writes (mode 0600). */
  loginFile: string;
  /** What deployment builds and local agent servers inherit: PATH, HOME and npm settings. */
  processEnv: Record<string, string>;
  /** The environment as given: the platform's services read their own settings from it (service-config.ts). */
  serviceEnv: Readonly<Record<string, string | undefined>>;
};

/** Variables passed on to builds and agent servers; everything else stays with the CLI. */
const INHERITED = /^(PATH|HOME|TMPDIR|LANG|npm_config_[a-z_]+|NPM_CONFIG_[A-Z_]+|NODE_EXTRA_CA_CERTS|HTTPS?_PROXY|NO_PROXY)$/;

/** @param checkoutDir the Berth checkout the CLI runs from: two folders up from cli/src/env.ts and cli/dist/env.js alike (tests give another). */
export function loadCliEnv(
  env: Record<string, string | undefined> = process.env,
  cwd = process.cwd(),
  checkoutDir = fileURLToPath(new URL('../..', import.meta.url)),
): CliEnv {
  const parsed = parseEnv(schema, env);
  // The XDG spec says a relative XDG_CONFIG_HOME is invalid and to be ignored.
  const configHome = parsed.XDG_CONFIG_HOME && isAbsolute(parsed.XDG_CONFIG_HOME) ? parsed.XDG_CONFIG_HOME : join(parsed.HOME ?? homedir(), '.config');
  const configDir = join(configHome, 'berth');
  const processEnv = Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => INHERITED.test(e[0]) && e[1] !== undefined));
  const stateDir = resolve(cwd, parsed.BERTH_STATE_DIR ?? '.berth');
  const checkoutStateDir = join(checkoutDir, '.berth');
  return {
    ...parsed,
    stateDir,
    checkoutStateDir: parsed.BERTH_STATE_DIR === undefined && checkoutStateDir !== stateDir ? checkoutStateDir : undefined,
    configDir,
    loginFile: join(configDir, 'credentials.json'),
    processEnv,
    serviceEnv: { ...env },
  };
}

/** The environment handed to the detached platform process started by `berth up`. */
export function childEnv(overrides: Record<string, string>): NodeJS.ProcessEnv {
  return { ...process.env, ...overrides };
}
