/**
 * The sandbox-manager's environment (DATABASE_URL, BERTH_SECRET_KEY, GRPC_HOST, GRPC_PORT, LOG_LEVEL,
 * BERTH_INTERNAL_TOKEN, BERTH_SANDBOX_PRIVATE_EGRESS, SANDBOX_*): the only place it reads process.env.
 * The driver itself is built by main.ts from `driver`.
 */
import { parseEnv, parseGrpcServerEnv } from '@berth/config';
import { InvalidCidrError, parseCidr } from '@berth/egress';
import { z } from 'zod';
import type { SandboxManagerConfig } from './config.js';

const list = z
  .string()
  .optional()
  .transform((text) => (text ?? '').split(',').map((item) => item.trim()).filter(Boolean));

/** `10.0.0.0/8,192.168.1.5/32`: each a valid CIDR. */
const cidrs = list.refine(
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

const schema = z.object({
  DATABASE_URL: z.string().min(1),
  /** 32 bytes, base64: seals registry passwords and opaque proxy header values. */
  BERTH_SECRET_KEY: z.string().min(1),
  /** Private CIDRs sandboxes may reach through the auth proxy (everything else private is refused). */
  BERTH_SANDBOX_PRIVATE_EGRESS: cidrs,
  /** container (Docker Engine API), kubernetes, or none (sandbox calls answer 503). */
  SANDBOX_DRIVER: z.enum(['container', 'kubernetes', 'none']).default('none'),
  /** The Docker Engine API socket of the container driver (Docker's, or `podman system service`'s). */
  SANDBOX_DOCKER_SOCKET: z.string().default('/var/run/docker.sock'),
  /** Where the container driver keeps each sandbox's sockets (bind-mounted into it). */
  SANDBOX_RUN_DIR: z.string().default('/run/berth-sandboxes'),
  /** Image of sandboxes created without a snapshot or template. */
  SANDBOX_DEFAULT_IMAGE: z.string().optional(),
  /** Registries pulled over plain HTTP (host:port, comma-separated). */
  SANDBOX_INSECURE_REGISTRIES: list,
});

export type SandboxDriverEnv = { kind: 'none' } | { kind: 'container'; socketPath: string; runDir: string } | { kind: 'kubernetes' };

export function loadSandboxManagerConfig(env: Record<string, string | undefined> = process.env): SandboxManagerConfig & { driver: SandboxDriverEnv } {
  const e = parseEnv(schema, env);
  return {
    ...parseGrpcServerEnv(env),
    databaseUrl: e.DATABASE_URL,
    secretKey: e.BERTH_SECRET_KEY,
    sandboxes: {
      privateEgress: e.BERTH_SANDBOX_PRIVATE_EGRESS,
      insecureRegistries: e.SANDBOX_INSECURE_REGISTRIES,
      ...(e.SANDBOX_DEFAULT_IMAGE ? { defaultImage: e.SANDBOX_DEFAULT_IMAGE } : {}),
    },
    driver: e.SANDBOX_DRIVER === 'container' ? { kind: 'container', socketPath: e.SANDBOX_DOCKER_SOCKET, runDir: e.SANDBOX_RUN_DIR } : { kind: e.SANDBOX_DRIVER },
  };
}
