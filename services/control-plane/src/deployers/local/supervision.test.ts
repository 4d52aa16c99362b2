/**
 * The local deployer supervises the agent servers it deployed: real processes on real Postgres,
 * killed with SIGKILL (or exiting by themselves). A crash is reported (deploy log, control-plane
 * log, a health event) and the server is restarted on its url, with a growing, capped backoff;
 * runs it had in flight are taken over; a deliberate retire is never restarted.
 */
import { afterAll, afterEach, beforeAll, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rename, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { AGENT_SERVE_SCRIPT } from '@berth/agent-runtime';
import { ManualClock } from '@berth/clock';
import { createLogger } from '@berth/log';
import { createTestDatabase, type TestDatabase } from '@berth/testing';
import { collectLog } from '../contract.js';
import type { RevisionHealthEvent, RevisionSpec } from '../deployer.js';
import { oneGraph, projectMaker } from './__tests__/projects.js';
import { LocalDeployer, type RestartPolicy } from './local-deployer.js';
import { answers, until } from '../../__tests__/until.js';

const slowGraph = readFileSync(fileURLToPath(new URL('../../../../agent-runtime/test-projects/slow/src/graph.ts', import.meta.url)), 'utf8');

let db: TestDatabase;
let work: string;
let project: ReturnType<typeof projectMaker>;
const deployers: LocalDeployer[] = [];

beforeAll(async () => {
  db = await createTestDatabase('cp_supervise');
  work = await mkdtemp(join(tmpdir(), 'berth-supervise-'));
  project = projectMaker(work);
});
afterEach(async () => {
  await Promise.all(deployers.splice(0).map((d) => d.close()));
});
afterAll(async () => {
  await db?.drop();
  await rm(work, { recursive: true, force: true });
});

/** A deployer whose control-plane log lines and health events the test reads; restarts wait on `clock` when given. */
function supervisor(restart: RestartPolicy, clock?: ManualClock) {
  const out = new PassThrough();
  const logged: Record<string, unknown>[] = [];
  out.on('data', (chunk: Buffer) =>
    chunk
      .toString()
      .split('\n')
      .filter(Boolean)
      .forEach((line) => logged.push(JSON.parse(line) as Record<string, unknown>)),
  );
  const deployer = new LocalDeployer({
    serveScript: AGENT_SERVE_SCRIPT,
    logger: createLogger({ name: 'control-plane', destination: out }),
    baseEnv: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
    healthTimeoutMs: 20_000,
    drainMs: 5_000,
    restart,
    ...(clock ? { clock } : {}),
  });
  deployers.push(deployer);
  const events: RevisionHealthEvent[] = [];
  deployer.onHealth((event) => events.push(event));
  return { deployer, events, logged };
}

async function spec(files: Record<string, string>): Promise<RevisionSpec> {
  const deploymentId = randomUUID();
  return {
    deploymentId,
    revisionId: randomUUID(),
    tenantId: randomUUID(),
    name: `supervised-${deploymentId.slice(0, 8)}`,
    deploymentType: 'dev',
    artifact: await project(files),
    secrets: {},
    env: { DATABASE_URL: db.url, BERTH_AGENT_SCHEMA: `agent_${deploymentId.replace(/-/g, '')}`, LOG_LEVEL: 'info' },
    resources: { replicas: 1 },
  };
}

/** The pid of the agent server the deploy log says was started last. */
function lastPid(text: string): number {
  return Number([...text.matchAll(/starting the agent server \(pid (\d+)\)/g)].at(-1)![1]);
}

async function call<T>(url: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as T;
}

it('restarts an agent server killed with SIGKILL on its url, reports the crash, and the runs it had in flight finish', async () => {
  const { deployer, events, logged } = supervisor({ initialDelayMs: 500 });
  const revision = await spec({ 'langgraph.json': JSON.stringify({ graphs: { slow: './src/graph.ts:graph' } }), 'src/graph.ts': slowGraph });
  const log = collectLog();
  const { url } = await deployer.deploy(revision, log.log);
  const runs = await Promise.all(
    [1, 2, 3].map(async () => {
      const { thread_id } = await call<{ thread_id: string }>(url, '/threads', {});
      const run = await call<{ run_id: string }>(url, `/threads/${thread_id}/runs`, {
        assistant_id: 'slow',
        input: { waited_ms: 0 },
        context: { delay_ms: 3000 },
      });
      return `/threads/${thread_id}/runs/${run.run_id}`;
    }),
  );
  await until(
    'the runs to be running',
    async () => ((await Promise.all(runs.map((path) => call<{ status: string }>(url, path)))).every((r) => r.status === 'running') ? true : undefined),
    10_000,
  );

  process.kill(lastPid(log.text()), 'SIGKILL');
  const down = await until('the crash report', () => events.find((e) => !e.healthy), 5_000);
  expect(down).toEqual({
    deploymentId: revision.deploymentId,
    revisionId: revision.revisionId,
    healthy: false,
    reason: 'the agent server exited with signal SIGKILL; restarting in 0.5 s',
  });
  const crash = log.lines.findIndex((l) => l.line === down.reason);
  expect(log.lines[crash]!.level).toBe('error');
  // Its last output lines follow (the server logged that it was ready).
  expect(
    log.lines
      .slice(crash + 1)
      .map((l) => l.line)
      .join('\n'),
  ).toMatch(/its last output lines:[\s\S]*agent server ready/);
  expect(logged.find((l) => l.msg === 'an agent server crashed')).toMatchObject({
    level: 50,
    revisionId: revision.revisionId,
    signal: 'SIGKILL',
    restartInMs: 500,
  });

  const up = await until('the restart', () => events.find((e) => e.healthy), 20_000);
  expect(up).toEqual({ deploymentId: revision.deploymentId, revisionId: revision.revisionId, healthy: true, url });
  expect(await answers(url)).toBe(true);
  expect(deployer.running(revision.deploymentId)).toEqual([revision.revisionId]);
  // Their leases run out and the restarted server takes them over from their checkpoints.
  const outcomes = await until(
    'the runs to end',
    async () => {
      const states = await Promise.all(runs.map((path) => call<{ status: string }>(url, path)));
      return states.every((r) => !['pending', 'running'].includes(r.status)) ? states.map((r) => r.status) : undefined;
    },
    40_000,
  );
  expect(outcomes).toEqual(['success', 'success', 'success']);
}, 90_000);

it('never restarts a retired agent server', async () => {
  const clock = new ManualClock();
  const { deployer, events } = supervisor({ initialDelayMs: 200 }, clock);
  const revision = await spec(oneGraph(slowGraph));
  const log = collectLog();
  const { url } = await deployer.deploy(revision, log.log);
  // Supervised: a kill brings it back once its restart delay passed.
  process.kill(lastPid(log.text()), 'SIGKILL');
  await until('the crash', () => events.find((e) => !e.healthy), 20_000);
  expect(await clock.runNext()).toBe(true);
  await until('the restart', () => events.find((e) => e.healthy), 20_000);
  await deployer.retire(revision.deploymentId, revision.revisionId, log.log);
  // No restart is pending, and none comes however long one waits.
  expect(clock.pending).toBe(0);
  await clock.advance(3_600_000);
  expect(deployer.running(revision.deploymentId)).toEqual([]);
  expect(await answers(url)).toBe(false);
  expect(events.map((e) => e.healthy)).toEqual([false, true]);
}, 60_000);

it('waits longer after each crash in a row, up to the cap', async () => {
  const clock = new ManualClock();
  const { deployer, events } = supervisor({ initialDelayMs: 200, maxDelayMs: 800 }, clock);
  // Serves, then exits by itself a moment later: every time it is started.
  const exitOnceServing = `
const serving = setInterval(() => {
  fetch('http://127.0.0.1:' + process.env.PORT + '/ok').then((r) => r.ok && (clearInterval(serving), setTimeout(() => process.exit(3), 200)), () => undefined);
}, 100);
`;
  const revision = await spec(oneGraph(`${slowGraph}\n${exitOnceServing}`));
  const log = collectLog();
  await deployer.deploy(revision, log.log);
  const crashes = () => events.filter((e) => !e.healthy).length;
  for (let crash = 1; crash <= 5; crash += 1) {
    await until(`crash ${crash}`, () => crashes() === crash, 20_000);
    // Its restart delay passes on the clock (no time passes between restarts: each crash is in a row).
    expect(await clock.runNext()).toBe(true);
    await until(`restart ${crash}`, () => events.filter((e) => e.healthy).length === crash, 20_000);
  }
  expect(
    events
      .filter((e) => !e.healthy)
      .slice(0, 5)
      .map((e) => (e.healthy ? '' : e.reason)),
  ).toEqual(['0.2 s', '0.4 s', '0.8 s', '0.8 s', '0.8 s'].map((delay) => `the agent server exited with code 3; restarting in ${delay}`));
  // It came back in between each time.
  expect(events.slice(0, 9).map((e) => e.healthy)).toEqual([false, true, false, true, false, true, false, true, false]);
}, 90_000);

it('waits the initial delay again once a restarted server stayed up long enough', async () => {
  const clock = new ManualClock();
  const { deployer, events } = supervisor({ initialDelayMs: 200, resetAfterMs: 2500 }, clock);
  const revision = await spec(oneGraph(slowGraph));
  const log = collectLog();
  await deployer.deploy(revision, log.log);
  const killAndWait = async (count: number) => {
    process.kill(lastPid(log.text()), 'SIGKILL');
    await until('the crash', () => (events.filter((e) => !e.healthy).length === count ? true : undefined), 20_000);
    expect(await clock.runNext()).toBe(true); // its restart delay passes
    await until('the restart', () => (events.filter((e) => e.healthy).length === count ? true : undefined), 20_000);
  };
  await killAndWait(1);
  await killAndWait(2); // at once: a crash in a row
  await clock.advance(2_499);
  await killAndWait(3); // up 2.499 s: still in a row
  await clock.advance(2_500);
  await killAndWait(4); // after it stayed up
  expect(events.filter((e) => !e.healthy).map((e) => (e.healthy ? '' : e.reason.replace(/.*restarting in /, '')))).toEqual([
    '0.2 s',
    '0.4 s',
    '0.8 s',
    '0.2 s',
  ]);
}, 60_000);

it('keeps trying an agent server that cannot even be spawned (its folder is gone) until it can', async () => {
  const { deployer, events } = supervisor({ initialDelayMs: 500, maxDelayMs: 1000 });
  const revision = await spec(oneGraph(slowGraph));
  const folder = (revision.artifact as { path: string }).path;
  const log = collectLog();
  const { url } = await deployer.deploy(revision, log.log);
  await rename(folder, `${folder}.away`);
  process.kill(lastPid(log.text()), 'SIGKILL');
  const failed = await until('a failed spawn', () => events.find((e) => !e.healthy && e.reason.includes('could not be started')), 10_000);
  expect(failed.healthy || failed.reason).toMatch(/^the agent server could not be started \(.*ENOENT\); restarting in (0\.5|1) s$/);
  await rename(`${folder}.away`, folder);
  const up = await until('the restart', () => events.find((e) => e.healthy), 20_000);
  expect(up.healthy && up.url).toBe(url);
  expect(await answers(url)).toBe(true);
}, 60_000);

it('moves to a new port, reported with the recovery, when its port was taken while it was down', async () => {
  const { deployer, events } = supervisor({ initialDelayMs: 1000 });
  const revision = await spec(oneGraph(slowGraph));
  const log = collectLog();
  const { url } = await deployer.deploy(revision, log.log);
  process.kill(lastPid(log.text()), 'SIGKILL');
  await until('the crash report', () => events.find((e) => !e.healthy), 5_000);
  const squatter = createServer();
  await new Promise<void>((resolve) => squatter.listen(Number(new URL(url).port), '127.0.0.1', resolve));
  try {
    const up = await until('the restart', () => events.find((e) => e.healthy), 20_000);
    expect(up.healthy && up.url).not.toBe(url);
    expect(up.healthy && (await answers(up.url))).toBe(true);
    expect(log.text()).toContain(`${url} is taken now: the agent server moves to ${up.healthy && up.url}`);
  } finally {
    squatter.close();
  }
}, 60_000);
