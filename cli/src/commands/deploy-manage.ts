/**
 * `berth deploy list | revisions | logs | delete`: look after existing deployments. They use the
 * same gateway and credential as `berth deploy` (the project's `.env` included, when run in one).
 */
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { CliError, GatewayHttpError } from '../client.js';
import { gatewayClient, type ConnectionFlags } from '../connection.js';
import type { CliEnv } from '../env.js';
import { DeploymentsApi, type Deployment, type LogEntry, type Revision } from '../deploy/api.js';
import { formatLog, localDay } from '../deploy/log-line.js';
import { readDotEnv } from '../deploy/project.js';
import { resolveDeployment, type DeploymentRef } from '../deploy/target.js';
import { table } from '../table.js';

type Print = (line: string) => void;

interface CommonFlags extends ConnectionFlags {
  json?: boolean;
}

/** Runs `body` with a client for the current directory's gateway. */
async function withApi<T>(env: CliEnv, flags: CommonFlags, cwd: string, body: (api: DeploymentsApi) => Promise<T>): Promise<T> {
  const projectEnv = (await readDotEnv(join(cwd, '.env'))) ?? {};
  return body(new DeploymentsApi(await gatewayClient(env, flags, projectEnv)));
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

export async function deployRevisions(
  env: CliEnv,
  flags: CommonFlags & DeploymentRef & { /** Checked by its flag parser. @default 10 */ limit?: number },
  print: Print,
  cwd = process.cwd(),
): Promise<Revision[]> {
  return withApi(env, flags, cwd, async (api) => {
    const deployment = await resolveDeployment(api, flags, cwd);
    const page = await api.revisions(deployment.id, flags.limit ?? 10);
    if (flags.json) print(JSON.stringify(page.resources));
    else {
      table(
        page.resources.map((r) => ({
          id: r.id,
          // Only one revision serves; an earlier DEPLOYED one has been replaced.
          status:
            r.status === 'DEPLOYED' && r.id !== deployment.active_revision_id
              ? 'REPLACED'
              : r.id === deployment.active_revision_id
                ? 'DEPLOYED (serving)'
                : r.status,
          created: r.created_at,
          message: r.status_message || '-',
        })),
        print,
      );
    }
    return page.resources;
  });
}

export interface LogsFlags extends CommonFlags, DeploymentRef {
  revisionId?: string;
  type?: 'build' | 'deploy';
  /** The last lines to show; checked by its flag parser. @default 100 */
  tail?: number;
  /** The old name of `tail` (still taken). */
  limit?: number;
  follow?: boolean;
  /** Stops following (tests; a person presses Ctrl-C). */
  signal?: AbortSignal;
}

/** Entries per request (the API's most). */
const LOG_PAGE = 1000;

export async function deployLogs(env: CliEnv, flags: LogsFlags, print: Print, cwd = process.cwd()): Promise<LogEntry[]> {
  const want = flags.tail ?? flags.limit ?? 100;
  return withApi(env, flags, cwd, async (api) => {
    const deploymentId = (await resolveDeployment(api, flags, cwd)).id;
    let day = '';
    const show = (entry: LogEntry) => {
      if (flags.json) return print(JSON.stringify(entry));
      // Lines show the time of day; a line of its own says the date when it changes.
      if (localDay(entry.timestamp) !== day) print(`# ${(day = localDay(entry.timestamp))}`);
      print(formatLog(entry));
    };
    const query = { ...(flags.revisionId ? { revisionId: flags.revisionId } : {}), ...(flags.type ? { type: flags.type } : {}) };
    const read = (page: { revisionId?: string; tail?: number; before?: number; limit?: number }) =>
      api.logs(deploymentId, { ...query, ...page }).catch((error: unknown) => {
        throw missing(error, flags.revisionId ? `revision ${flags.revisionId} of deployment ${deploymentId}` : `deployment ${deploymentId}`);
      });
    // The newest page (tail), then pages before its oldest entry until there are `want` or the log's first.
    const newest = await read({ tail: Math.min(want, LOG_PAGE) });
    const revisionId = newest.revision_id;
    let offset = newest.next_offset;
    const tail = [...newest.logs];
    for (let more = newest.logs.length === Math.min(want, LOG_PAGE); more && tail.length < want;) {
      const limit = Math.min(want - tail.length, LOG_PAGE);
      // Of the revision the newest page was (the latest may change meanwhile).
      const older = await read({ ...(revisionId ? { revisionId } : {}), before: tail[0]!.id, limit });
      tail.unshift(...older.logs);
      more = older.logs.length === limit;
    }
    if (!flags.json && revisionId) print(`# logs of revision ${revisionId}`);
    tail.forEach(show);
    if (!flags.follow || !revisionId) return tail;
    const seen = new Set(tail.map((e) => e.id));
    // The log streams (server-sent events) until it ends; a broken stream resumes after the last entry.
    let following: string = flags.revisionId ?? revisionId;
    while (!flags.signal?.aborted) {
      let ended = false;
      const frames = api.followLogs(deploymentId, {
        revisionId: following,
        ...(flags.type ? { type: flags.type } : {}),
        offset,
        ...(flags.signal ? { signal: flags.signal } : {}),
      });
      for await (const frame of frames) {
        if (frame.event === 'end') ended = true;
        if (frame.event !== 'log') continue;
        const entry = JSON.parse(frame.data) as LogEntry;
        offset = Math.max(offset, entry.id);
        if (seen.has(entry.id)) continue;
        seen.add(entry.id);
        tail.push(entry);
        show(entry);
      }
      if (flags.signal?.aborted) break;
      if (!ended) {
        await sleep(1000, undefined, flags.signal ? { signal: flags.signal } : {}).catch(() => undefined);
        continue;
      }
      if (flags.revisionId) break;
      // Its log ended (a newer revision replaced it, or it failed): on to the newest revision, if another.
      const latest = (await api.logs(deploymentId, { ...query, limit: 1 })).revision_id;
      if (!latest || latest === following) break;
      following = latest;
      offset = 0;
      if (!flags.json) print(`# logs of revision ${following}`);
    }
    return tail;
  });
}

export interface DeleteFlags extends CommonFlags, DeploymentRef {
  /** Delete without asking. */
  yes?: boolean;
}

/** Asks a question on the terminal; undefined when stdin is not one (a script, a pipe). */
function askOnTerminal(question: string): Promise<string | undefined> {
  if (!process.stdin.isTTY) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const terminal = createInterface({ input: process.stdin, output: process.stderr });
    let answered = false;
    const answer = (text: string) => {
      if (answered) return;
      answered = true;
      terminal.close();
      resolve(text);
    };
    // Ctrl-C or Ctrl-D is a no.
    terminal.once('SIGINT', () => answer(''));
    terminal.once('close', () => answer(''));
    terminal.question(question, answer);
  });
}

export async function deployDelete(env: CliEnv, flags: DeleteFlags, print: Print, cwd = process.cwd()): Promise<Deployment> {
  return withApi(env, flags, cwd, async (api) => {
    const deployment = await resolveDeployment(api, flags, cwd);
    const what = `deployment ${deployment.name} (${deployment.id})`;
    if (!flags.yes) {
      const answer = await askOnTerminal(`Delete ${what}? [y/N] `);
      if (answer === undefined) throw new CliError(`not deleting ${what} without confirmation: stdin is not a terminal, so pass --yes`);
      if (!/^y(es)?$/i.test(answer.trim())) throw new CliError(`cancelled: ${what} was not deleted`);
    }
    await api.delete(deployment.id).catch((error: unknown) => {
      throw missing(error, `deployment ${deployment.id}`);
    });
    print(flags.json ? JSON.stringify({ deleted: deployment.id, name: deployment.name }) : `Deleted ${what}.`);
    return deployment;
  });
}
