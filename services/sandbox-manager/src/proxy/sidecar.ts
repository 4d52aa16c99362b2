/**
 * The auth proxy as a Kubernetes sidecar: `node dist/proxy/sidecar.js --config /etc/berth-proxy/config.json`.
 * It serves until SIGTERM (or SIGINT).
 *
 * The config file (JSON; mount it from a Secret — the rules' header values are plaintext in it):
 *
 *     {
 *       "listen": "127.0.0.1:3128",              // host:port, [::1]:3128 for IPv6
 *       "policy": {                               // an EgressPolicy (drivers/driver.ts)
 *         "rules": [{ "name": "openai", "matchHosts": ["api.openai.com"],
 *                     "headers": [{ "name": "Authorization", "value": "Bearer sk-…" }] }],
 *         "allowList": [], "denyList": ["*.evil.example"], "privateAllow": ["10.96.0.0/12"]
 *       },
 *       "caCertPath": "/etc/berth-proxy/ca.crt",  // the Berth sandbox proxy CA (PEM)
 *       "caKeyPath": "/etc/berth-proxy/ca.key",   // its PKCS#8 key (PEM)
 *       "logLevel": "info"                         // optional
 *     }
 *
 * The sandbox container gets `proxyEnvironment({ port: 3128, caPath })` (pods share loopback).
 */
import { readFile } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { createLogger, shutdownOnSignals, type Logger } from '@berth/log';
import { ProxyCa } from './proxy-ca.js';
import { SandboxProxy } from './sandbox-proxy.js';

const listenAddress = z
  .string()
  .regex(/^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+):\d{1,5}$/, 'listen is host:port, e.g. 127.0.0.1:3128')
  .transform((text) => {
    const colon = text.lastIndexOf(':');
    return { host: text.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(text.slice(colon + 1)) };
  })
  .refine((address) => address.port <= 65535, 'the port is at most 65535');

/** The sidecar's config file (see the module comment). */
export const sidecarConfigSchema = z.strictObject({
  listen: listenAddress,
  policy: z.strictObject({
    rules: z.array(
      z.strictObject({
        name: z.string(),
        matchHosts: z.array(z.string().min(1)),
        headers: z.array(z.strictObject({ name: z.string().min(1), value: z.string() })),
      }),
    ),
    allowList: z.array(z.string()),
    denyList: z.array(z.string()),
    privateAllow: z.array(z.string()),
  }),
  caCertPath: z.string().min(1),
  caKeyPath: z.string().min(1),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).optional(),
});
export type SidecarConfig = z.output<typeof sidecarConfigSchema>;
/** The file's JSON shape (what the Kubernetes adapter writes). */
export type SidecarConfigFile = z.input<typeof sidecarConfigSchema>;

/** The config file is missing, not JSON, or not in the format above; `message` says which. */
export class SidecarConfigError extends Error {
  override readonly name = 'SidecarConfigError';
}

export async function readSidecarConfig(path: string): Promise<SidecarConfig> {
  let json: unknown;
  try {
    json = JSON.parse(await readFile(path, 'utf8'));
  } catch (error) {
    throw new SidecarConfigError(`cannot read the proxy config ${path}: ${(error as Error).message}`, { cause: error });
  }
  const parsed = sidecarConfigSchema.safeParse(json);
  if (!parsed.success) {
    // Issues name paths, never values (the file holds header values).
    const details = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`).join('; ');
    throw new SidecarConfigError(`the proxy config ${path} is not valid: ${details}`);
  }
  return parsed.data;
}

/** Starts the proxy a config describes; resolves once it listens. */
export async function startSidecar(config: SidecarConfig, logger: Logger): Promise<SandboxProxy> {
  const ca = await ProxyCa.fromPem({ certPem: await readFile(config.caCertPath, 'utf8'), keyPem: await readFile(config.caKeyPath, 'utf8') });
  const proxy = new SandboxProxy({ listen: config.listen, policy: config.policy, ca, logger });
  const port = await proxy.listen();
  logger.info({ host: config.listen.host, port, rules: config.policy.rules.map((r) => r.name) }, 'sandbox proxy listening');
  return proxy;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { config: { type: 'string' } } });
  if (!values.config) {
    process.stderr.write('usage: node sidecar.js --config /etc/berth-proxy/config.json\n');
    process.exit(2);
  }
  let config: SidecarConfig;
  try {
    config = await readSidecarConfig(values.config);
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`);
    process.exit(2);
  }
  const logger = createLogger({ name: 'sandbox-proxy', level: config.logLevel ?? 'info' });
  const proxy = await startSidecar(config, logger);
  shutdownOnSignals(logger, () => proxy.close());
}

// Run only as the entry point: the Kubernetes adapter imports the schema from here.
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
