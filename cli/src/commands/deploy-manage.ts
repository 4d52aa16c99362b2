/**
 * `berth deploy list | revisions | logs | delete`: look after existing deployments. They use the
 * same gateway and credential as `berth deploy` (the project's `.env` included, when run in one).
 */
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError, GatewayHttpError, type GatewayClient } from '../client.js';
import type { CliEnv } from '../env.js';
import { DeploymentsApi, type Deployment, type LogEntry, type Revision } from '../deploy/api.js';
import { deployClient, explain, type DeployConnectionFlags } from '../deploy/connection.js';
import { formatLog } from '../deploy/progress.js';
import { toDeploymentName } from '@berth/ids';
import { readDotEnv } from '../deploy/project.js';
import { table } from '../table.js';

type Print = (line: string) => void;

interface CommonFlags extends DeployConnectionFlags {
  json?: boolean;
}

/** Runs `body` with a client for the current directory's gateway, explaining refusals. */
async function withApi<T>(env: CliEnv, flags: CommonFlags, cwd: string, body: (api: DeploymentsApi) => Promise<T>): Promise<T> {
  const projectEnv = (await readDotEnv(join(cwd, '.env'))) ?? {};
  const client: GatewayClient = await deployClient(env, flags, projectEnv);
  try {
    return await body(new DeploymentsApi(client));
  } catch (error) {
    throw explain(error, client);
  }
}

/** A 404 from the gateway as a message about the id the person gave. */
function missing(error: unknown, what: string): unknown {
  return error instanceof GatewayHttpError && error.status === 404 ? new CliError(`${what} not found (\`berth deploy list\` shows your deployments)`) : error;
}

export async function deployList(env: CliEnv, flags: CommonFlags & { nameContains?: string }, print: Print, cwd = process.cwd()): Promise<Deployment[]> {
  return withApi(env, flags, cwd, async (api) => {
    const all: Deployment[] = [];
    let offset = 0;
    for (;;) {
      const page = await api.list({ ...(flags.nameContains ? { nameContains: flags.nameContains } : {}), offset });
      all.push(...page.resources);
      if (page.resources.length < 100 || page.offset <= offset) break;
      offset = page.offset;
    }
    if (flags.json) print(JSON.stringify(all));
    else {
      table(
        all.map((d) => ({
          id: d.id,
          name: d.name,
          type: d.source_config.deployment_type ?? '-',
          status: d.status,
          url: d.deployment_url,
        })),
        print,
      );
    }
    return all;
  });
}

export async function deployRevisions(env: CliEnv, flags: CommonFlags & { deploymentId: string; limit?: string }, print: Print, cwd = process.cwd()): Promise<Revision[]> {
  const limit = Number(flags.limit ?? 10);
  if (!Number.isInteger(limit) || limit < 1 || limit > 100) throw new CliError('--limit must be a whole number from 1 to 100');
  return withApi(env, flags, cwd, async (api) => {
    const [deployment, page] = await Promise.all([api.get(flags.deploymentId), api.revisions(flags.deploymentId, limit)]).catch((error: unknown) => {
      throw missing(error, `deployment ${flags.deploymentId}`);
    });
    if (flags.json) print(JSON.stringify(page.resources));
    else {
      table(
        page.resources.map((r) => ({
          id: r.id,
          // Only one revision serves; an earlier DEPLOYED one has been replaced.
          status: r.status === 'DEPLOYED' && r.id !== deployment.active_revision_id ? 'REPLACED' : r.id === deployment.active_revision_id ? 'DEPLOYED (serving)' : r.status,
          created: r.created_at,
          message: r.status_message || '-',
        })),
        print,
      );
    }
    return page.resources;
  });
}

export interface LogsFlags extends CommonFlags {
  name?: string;
  deploymentId?: string;
  revisionId?: string;
  type?: 'build' | 'deploy';
  limit?: string;
  follow?: boolean;
  /** Milliseconds between polls with --follow (tests). @default 2000 */
  pollMs?: number;
  /** Stops following (tests; a person presses Ctrl-C). */
  signal?: AbortSignal;
}

export async function deployLogs(env: CliEnv, flags: LogsFlags, print: Print, cwd = process.cwd()): Promise<LogEntry[]> {
  const limit = Number(flags.limit ?? 100);
  if (!Number.isInteger(limit) || limit < 1) throw new CliError('--limit must be a positive whole number');
  if (flags.name && flags.deploymentId) throw new CliError('give --name or --deployment-id, not both');
  return withApi(env, flags, cwd, async (api) => {
    const deploymentId = flags.deploymentId ?? (await deploymentIdByName(api, flags.name ?? toDeploymentName(basename(cwd)) ?? ''));
    const show = (entry: LogEntry) => print(flags.json ? JSON.stringify(entry) : formatLog(entry));
    const query = { ...(flags.revisionId ? { revisionId: flags.revisionId } : {}), ...(flags.type ? { type: flags.type } : {}) };
    // The API reads forward from an offset: page to the end, keep the last `limit` entries.
    const tail: LogEntry[] = [];
    let offset = 0;
    let revisionId: string | null = null;
    for (;;) {
      const page = await api.logs(deploymentId, { ...query, offset, limit: 1000 }).catch((error: unknown) => {
        throw missing(error, flags.revisionId ? `revision ${flags.revisionId} of deployment ${deploymentId}` : `deployment ${deploymentId}`);
      });
      revisionId = page.revision_id;
      tail.push(...page.logs);
      tail.splice(0, Math.max(0, tail.length - limit));
      offset = Math.max(offset, page.next_offset);
      if (page.logs.length < 1000) break;
    }
    if (!flags.json && revisionId) print(`# logs of revision ${revisionId}`);
    tail.forEach(show);
    if (!flags.follow) return tail;
    const seen = new Set(tail.map((e) => e.id));
    while (!flags.signal?.aborted) {
      await sleep(flags.pollMs ?? 2000, undefined, flags.signal ? { signal: flags.signal } : {}).catch(() => undefined);
      if (flags.signal?.aborted) break;
      const page = await api.logs(deploymentId, { ...query, offset, limit: 1000 });
      if (!flags.revisionId && page.revision_id && page.revision_id !== revisionId) {
        // `berth deploy` made a new revision meanwhile: follow the newest, from its start.
        revisionId = page.revision_id;
        if (!flags.json) print(`# logs of revision ${revisionId}`);
      }
      for (const entry of page.logs) {
        if (seen.has(entry.id)) continue;
        seen.add(entry.id);
        tail.push(entry);
        show(entry);
      }
      offset = Math.max(offset, page.next_offset);
    }
    return tail;
  });
}

async function deploymentIdByName(api: DeploymentsApi, name: string): Promise<string> {
  if (!name) throw new CliError('pass --name or --deployment-id');
  const found = await api.findByName(name);
  if (!found) throw new CliError(`no deployment named ${name} (\`berth deploy list\` shows your deployments; or pass --deployment-id)`);
  return found.id;
}

export async function deployDelete(env: CliEnv, flags: CommonFlags & { deploymentId: string }, print: Print, cwd = process.cwd()): Promise<void> {
  await withApi(env, flags, cwd, async (api) => {
    await api.delete(flags.deploymentId).catch((error: unknown) => {
      throw missing(error, `deployment ${flags.deploymentId}`);
    });
    print(flags.json ? JSON.stringify({ deleted: flags.deploymentId }) : `Deleted deployment ${flags.deploymentId}.`);
  });
}
