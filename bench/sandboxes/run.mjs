#!/usr/bin/env node
/**
 * bench/sandboxes: create-to-first-command of a sandbox, cold (its image already pulled, no pool)
 * and warm (from a warm pool), and the round trip of `true`, on the container driver, end to end
 * through the gateway with the official `langsmith/sandbox` client; against the same container
 * engine used directly (`podman run --rm … true`, `podman exec … true`) in the same run. Writes
 * its figures to docs/benchmarks.md (section bench:sandboxes).
 *
 * Self-contained: starts its own Postgres, private Podman engine (btrfs storage on a loop device
 * when mkfs.btrfs exists, else overlay without storage quotas), image registry and busybox image,
 * then the sandbox-manager and the gateway in one child process (platform.mjs), and removes all of
 * it at the end, also after a failure or Ctrl-C. Needs root (the engine is rootful).
 *
 * Usage (after `npx turbo run build`):
 *   node bench/sandboxes/run.mjs [--cold 20] [--warm 20] [--execs 200] [--replicas 3]
 *     [--podman-runs 20] [--podman-execs 50] [--no-write] [--keep]
 */
import { fork, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCHMARKS_DOC, writeSection } from '../doc-section.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const BEGIN = '<!-- bench:sandboxes:begin -->';
const END = '<!-- bench:sandboxes:end -->';
const TARGET = { warm: 50, cold: 1000, exec: 20 };
/** E2B's published sandbox start time (not measured here: a hosted service). */
const E2B_PUBLISHED_MS = 150;

const { values: opts } = parseArgs({
  options: {
    cold: { type: 'string', default: '20' },
    warm: { type: 'string', default: '20' },
    execs: { type: 'string', default: '200' },
    replicas: { type: 'string', default: '3' },
    'podman-runs': { type: 'string', default: '20' },
    'podman-execs': { type: 'string', default: '50' },
    'no-write': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const N = {};
for (const name of ['cold', 'warm', 'execs', 'replicas', 'podman-runs', 'podman-execs']) {
  N[name] = Number(opts[name]);
  if (!Number.isInteger(N[name]) || N[name] < 1 || N[name] > 10_000) throw new Error(`--${name} takes a whole number from 1 to 10000`);
}
if (N.replicas > 100) throw new Error('--replicas takes 1-100 (a pool holds at most 100)');

for (const file of ['services/sandbox-manager/dist/index.js', 'services/sandbox-manager/dist/agent/berth-sandboxd', 'services/gateway/dist/index.js', 'infra/local/dist/index.js']) {
  if (!existsSync(join(ROOT, file))) throw new Error(`${file} is missing: run \`npx turbo run build\` (or \`make build\`) first`);
}
const localStack = await import('@berth/local-stack');
const { DockerRegistry, PodmanService, PostgresServer, podmanUnavailableReason, run } = localStack;
const problem = podmanUnavailableReason();
if (problem) throw new Error(`this benchmark needs a private Podman engine, but ${problem}`);
// The busybox image of the tests (Debian's busybox-static, imported with `podman import`): in
// @berth/local-stack once it moves there, until then in the test library's build.
const { buildSandboxImages, pushImage } = localStack.buildSandboxImages
  ? localStack
  : await import(pathToFileURL(join(ROOT, 'libs/testing/dist/sandbox-image.js')).href);
const { Sandbox, SandboxClient } = await import('langsmith/sandbox');

const log = (line) => console.log(line);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- statistics ----

const sorted = (xs) => [...xs].sort((a, b) => a - b);
/** Nearest-rank percentile. */
const pct = (xs, q) => sorted(xs)[Math.max(0, Math.ceil(q * xs.length) - 1)];
const median = (xs) => pct(xs, 0.5);
const summary = (xs) => ({ n: xs.length, p50: pct(xs, 0.5), p95: pct(xs, 0.95), min: Math.min(...xs), max: Math.max(...xs) });
const ms = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

// ---- the platform child ----

function startPlatform(settings) {
  const child = fork(join(HERE, 'platform.mjs'), [JSON.stringify(settings)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const pending = new Map();
  let nextId = 0;
  let exited = false;
  const ready = new Promise((done, fail) => {
    child.on('message', (message) => {
      if (message.ready) return done(message.ready);
      const call = pending.get(message.id);
      if (!call) return;
      pending.delete(message.id);
      if (message.error) call.fail(new Error(message.error));
      else call.done(message.result);
    });
    child.on('exit', (code, signal) => {
      exited = true;
      const error = new Error(`the platform process exited (${code ?? signal}); logs in ${settings.logDir}`);
      fail(error);
      for (const call of pending.values()) call.fail(error);
    });
  });
  return {
    ready,
    child,
    get exited() {
      return exited;
    },
    call(op, args = {}) {
      return new Promise((done, fail) => {
        const id = (nextId += 1);
        pending.set(id, { done, fail });
        child.send({ id, op, ...args });
      });
    },
  };
}

// ---- the engine used directly ----

async function timedPodman(podman, args) {
  const started = performance.now();
  await podman.podman(args, 60_000);
  return performance.now() - started;
}

const temp = mkdtempSync('/tmp/bsb-'); // short: podman refuses a runroot path over 50 characters
chmodSync(temp, 0o755); // as root the Postgres server runs as the postgres user
const postgres = new PostgresServer({ baseDir: join(temp, 'pg'), port: 0, mode: 'fast', database: 'bench' });
const registry = new DockerRegistry({ directory: join(temp, 'registry') });
let podman;
let platform;
let stopping = false;

async function teardown() {
  if (stopping) return;
  stopping = true;
  const errors = [];
  if (platform && !platform.exited) {
    await Promise.race([platform.call('close'), sleep(30_000)]).catch((error) => errors.push(error));
    if (!platform.exited) platform.child.kill('SIGKILL');
  }
  for (const server of [podman, registry, postgres]) await server?.stop().catch((error) => errors.push(error));
  if (opts.keep) log(`kept ${temp}`);
  else rmSync(temp, { recursive: true, force: true });
  for (const error of errors) console.error(`cleanup: ${error.message}`);
}
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    console.error(`${signal}: cleaning up…`);
    teardown().finally(() => process.exit(130));
  });
}

try {
  log(`temp folder ${temp}`);
  const btrfs = await run('mkfs.btrfs', ['--version']).then(() => true, () => false);
  podman = new PodmanService({ directory: join(temp, 'podman'), storage: btrfs ? 'btrfs-loop' : 'overlay' });
  const [{ connectionString }] = await Promise.all([
    postgres.start(),
    registry.start(),
    podman.start().catch(async (error) => {
      if (podman.storage !== 'btrfs-loop') throw error;
      log(`btrfs storage failed (${error.message}); using overlay without storage quotas`);
      await podman.stop();
      podman = new PodmanService({ directory: join(temp, 'podman-o') });
      return podman.start();
    }),
  ]);
  mkdirSync(join(temp, 'images'));
  const local = await buildSandboxImages(podman, join(temp, 'images'));
  const image = await pushImage(podman, local.root, registry.host, 'berth-bench/busybox:1');
  // Sandboxes pull it from the registry, like any template image: no local copy left behind.
  await podman.podman(['rmi', '--force', local.user, local.root]);

  log('starting the sandbox-manager and the gateway…');
  mkdirSync(join(temp, 'sbx'), { mode: 0o700 });
  platform = startPlatform({
    databaseUrl: connectionString,
    secretKey: randomBytes(32).toString('base64'),
    driver: { kind: 'container', socketPath: podman.socketPath, runDir: join(temp, 'sbx'), storageQuota: podman.enforcesStorageQuota ? 'enforce' : 'ignore' },
    registry: registry.host,
    poolIntervalMs: 500,
    logLevel: 'warn',
    logDir: join(temp, 'logs'),
  });
  const { url, apiKey } = await platform.ready;
  const base = `${url}/api/v2/sandboxes`;
  const client = new SandboxClient({ apiEndpoint: base, apiKey });

  async function api(path, json, method = json === undefined ? 'GET' : 'POST') {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { 'x-api-key': apiKey, ...(json !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: json !== undefined ? JSON.stringify(json) : undefined,
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  }
  async function until(check, what, timeoutMs = 120_000) {
    const deadline = Date.now() + timeoutMs;
    while (!(await check())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  }

  log(`template and snapshot of ${image} (pulled once, before anything is timed)…`);
  await api('/templates', { name: 'bench', image });
  await until(async () => {
    const { status, status_message } = await api('/templates/bench');
    if (status === 'failed') throw new Error(`the template failed: ${status_message}`);
    return status === 'ready';
  }, 'the template to be pulled');
  const snapshot = await client.createSnapshot('bench-snapshot', image, 1024 ** 3);

  /**
   * Commands the platform cut off (`the command was cut off: …`; until 176d211 an EPIPE race between
   * the manager closing a command's stdin and the agent closing the connection after its exit), by
   * measurement. A failed sample is counted here and taken again; a failed exec is counted and left out.
   */
  const failures = {};
  const failed = (key, error) => {
    if (!/cut off/.test(String(error?.message))) throw error;
    (failures[key] ??= []).push(error.message);
  };
  /** `true` through `runOnce`, timed; undefined when it failed with a cut-off command. */
  async function timedRun(key, runOnce) {
    const started = performance.now();
    try {
      const result = await runOnce();
      if (result.exit_code !== 0) throw new Error(`true exited with ${result.exit_code}`);
      return performance.now() - started;
    } catch (error) {
      failed(key, error);
      return undefined;
    }
  }

  /** One create-to-first-command sample: `create()` returns a client Sandbox; then run('true'). */
  async function sample(key, create) {
    for (let attempt = 1; ; attempt += 1) {
      await platform.call('marks');
      const started = performance.now();
      const sandbox = await create();
      const created = performance.now() - started;
      const first = await timedRun(key, () => sandbox.run('true'));
      const spans = await platform.call('marks');
      // Not part of the sample: the next command, to tell the first command's own cost from the load around it.
      const second = first === undefined ? undefined : await timedRun(key, () => sandbox.run('true'));
      await client.deleteSandbox(sandbox.name);
      if (first !== undefined) return { total: created + first, create: created, firstCommand: first, second, spans, pool: sandbox.pool_name ?? null };
      if (attempt === 5) throw new Error(`${key}: the first command failed 5 times in a row`);
    }
  }
  // A template's sandbox through REST: the client cannot name a template (pools serve templates).
  const fromTemplate = async () => {
    const data = await api('/boxes', { template_name: 'bench', wait_for_ready: true, timeout: 60 });
    const sandbox = new Sandbox(data, client);
    sandbox.pool_name = data.pool_name;
    return sandbox;
  };
  const fromSnapshot = () => client.createSandbox(snapshot.id, { timeout: 60 });

  log('warm-up (not counted): 2 sandboxes…');
  for (let i = 0; i < 2; i += 1) await sample('warm-up', fromSnapshot);

  const results = {};
  for (const [key, label, create] of [
    ['coldSnapshot', 'cold, snapshot', fromSnapshot],
    ['coldTemplate', 'cold, template', fromTemplate],
  ]) {
    results[key] = [];
    for (let i = 0; i < N.cold; i += 1) {
      results[key].push(await sample(key, create));
      process.stdout.write(`\r${label}: ${i + 1}/${N.cold} (${ms(results[key].at(-1).total)} ms)   `);
    }
    log('');
  }

  log(`warm pool of ${N.replicas}…`);
  await api('/pools', { name: 'bench', template_name: 'bench', replicas: N.replicas });
  const poolFull = async () => (await api('/pools/bench')).ready_replicas >= N.replicas;
  await until(poolFull, 'the pool to fill');
  results.warm = [];
  for (let i = 0; i < N.warm; i += 1) {
    // The keeper refills after each claim; each sample starts with a full pool and a quiet engine.
    await until(poolFull, 'the pool to refill');
    await sleep(200);
    results.warm.push(await sample('warm', fromTemplate));
    process.stdout.write(`\rwarm: ${i + 1}/${N.warm} (${ms(results.warm.at(-1).total)} ms)   `);
  }
  log('');
  // Not how Berth runs: the same with the keeper's refill held until the sample is over, to show
  // what the refill, which starts at the claim, costs the sample on this machine's 2 CPUs.
  results.warmHeld = [];
  for (let i = 0; i < N.warm; i += 1) {
    await until(poolFull, 'the pool to refill');
    await sleep(200);
    await platform.call('holdRefill', { hold: true });
    results.warmHeld.push(await sample('warmHeld', fromTemplate));
    await platform.call('holdRefill', { hold: false });
    process.stdout.write(`\rwarm, refill held: ${i + 1}/${N.warm} (${ms(results.warmHeld.at(-1).total)} ms)   `);
  }
  log('');
  await api('/pools/bench', undefined, 'DELETE');
  const servedFromPool = (key) => results[key].filter((r) => r.pool === 'bench').length;

  log(`exec round trip: ${N.execs} × run('true')…`);
  const box = await client.createSandbox(snapshot.id, { timeout: 60 });
  const execs = { ws: [], http: [], wsSpans: [] };
  for (let i = 0; i < 10; i += 1) await timedRun('warm-up', () => box.run('true'));
  // Its instance, from the driver's exec spans (other spans may be the deleted pool's).
  const instance = (await platform.call('marks')).findLast((s) => s.what === 'driver.exec: agent spawned')?.instance;
  for (const [key, runOnce] of [
    // What run('true') does when the `ws` package is installed (it is here): a WebSocket per command.
    ['ws', () => box.run('true')],
    // What run('true') does without `ws`: POST {dataplane_url}/execute (the client's own method).
    ['http', () => box._runHttp('true')],
  ]) {
    await platform.call('marks');
    for (let i = 0; i < N.execs; i += 1) {
      const took = await timedRun(key, runOnce);
      if (took !== undefined) execs[key].push(took);
    }
    execs[`${key}Spans`] = await platform.call('marks');
  }
  if (!instance) throw new Error('the exec sandbox\'s instance was not seen in the driver\'s spans');
  execs.agent = (await platform.call('agentExec', { instance, n: N.execs, closeStdin: false })).ms;
  // The manager closes a command's stdin right after the spawn (the client asks it to): the same
  // through the driver alone, to show where the cut-off commands come from.
  const agentClosing = await platform.call('agentExec', { instance, n: N.execs, closeStdin: true });
  execs.agentClosing = agentClosing.ms;
  if (agentClosing.errors.length) failures.agentClosing = agentClosing.errors;
  await client.deleteSandbox(box.name);

  log(`the engine directly: ${N['podman-runs']} × podman run, ${N['podman-execs']} × podman exec…`);
  const podmanRun = [];
  for (let i = 0; i < N['podman-runs']; i += 1) podmanRun.push(await timedPodman(podman, ['run', '--rm', '--network', 'none', image, 'true']));
  await podman.podman(['run', '-d', '--name', 'bench-exec', '--network', 'none', image, 'sleep', '3600']);
  const podmanExec = [];
  for (let i = 0; i < N['podman-execs']; i += 1) podmanExec.push(await timedPodman(podman, ['exec', 'bench-exec', 'true']));
  await podman.podman(['rm', '--force', '--time', '0', 'bench-exec']);

  // ---- the report ----
  const rev = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const versions = {
    podman: (await run('podman', ['--version'])).stdout.trim().replace(/^podman version /, ''),
    runc: (await run('runc', ['--version'])).stdout.split('\n')[0].replace(/^runc version /, ''),
    langsmith: JSON.parse(readFileSync(join(ROOT, 'node_modules/langsmith/package.json'), 'utf8')).version,
  };
  const cpu = os.cpus()[0]?.model.replace(/\s+/g, ' ').trim() ?? 'unknown CPU';
  const verdict = (value, target) => (value <= target ? 'met' : '**missed**');
  const row = (what, xs, target, key) => {
    const s = summary(xs);
    const failedRuns = key ? String(failures[key]?.length ?? 0) : '';
    return `| ${what} | ${s.n} | ${failedRuns} | ${ms(s.p50)} | ${ms(s.p95)} | ${ms(s.min)} | ${ms(s.max)} | ${target ? `≤ ${target}: ${verdict(s.p50, target)} (p50)` : ''} |`;
  };
  /** Median per span kind across samples (0 where a sample lacks it); kinds in fewer than half the samples are left out. */
  function breakdown(samples) {
    const kinds = [...new Set(samples.flatMap((s) => s.spans.map((x) => x.what)))].filter(
      (kind) => samples.filter((s) => s.spans.some((x) => x.what === kind)).length * 2 >= samples.length,
    );
    const per = (kind) => median(samples.map((s) => s.spans.filter((x) => x.what === kind).reduce((a, x) => a + x.ms, 0)));
    return Object.fromEntries([
      ['client: create call answered (ready)', median(samples.map((s) => s.create))],
      ['client: first run(\'true\') answered', median(samples.map((s) => s.firstCommand))],
      ['client: second run(\'true\') (not in the total)', median(samples.map((s) => s.second).filter((x) => x !== undefined))],
      ...kinds.filter((k) => !k.startsWith('driver.remove')).map((k) => [k, per(k)]),
    ]);
  }
  const cold = breakdown(results.coldTemplate);
  const coldSnap = breakdown(results.coldSnapshot);
  const warm = breakdown(results.warm);
  const warmHeld = breakdown(results.warmHeld);
  const phaseKeys = [...new Set([...Object.keys(cold), ...Object.keys(coldSnap), ...Object.keys(warm), ...Object.keys(warmHeld)])];
  const cell = (x) => (x === undefined ? '' : ms(x));
  const execSpan = (spans, what) => spans.filter((s) => s.what === what).map((s) => s.ms);
  const execPhases = [
    ['driver.exec: agent spawned', 'the agent answers the spawn (new Unix-socket connection, fork + exec)'],
    ['driver.exec: spawn to exit', 'spawned → exit frame received'],
  ];
  const machine = `${os.cpus().length} CPUs (${cpu}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Linux ${os.release()}, Node ${process.version}`;
  const loadAfter = os.loadavg().map((x) => x.toFixed(1)).join(' / ');
  const command = ['node bench/sandboxes/run.mjs', ...Object.entries(N).map(([k, v]) => `--${k} ${v}`)].join(' ');
  const section = [
    BEGIN,
    '## Sandboxes: create-to-first-command and exec round trip (`bench/sandboxes`)',
    '',
    '**What:** one sandbox at a time on the container driver, end to end as a user would: the official `langsmith/sandbox`',
    `client ${versions.langsmith} against the gateway (\`/api/v2/sandboxes\`), which calls the sandbox-manager over gRPC; the`,
    'manager and the gateway run in one Node process (as in `berth up`), the client in the benchmark\'s own process.',
    '**Create-to-first-command** is timed from the create call until the result of the first `run(\'true\')` is back; the',
    `sandbox is then deleted (not timed). **Cold**: the image is already pulled, no pool: \`client.createSandbox(snapshot.id)\`,`,
    'and `POST /boxes {"template_name": …}` (REST: the client cannot name a template, and warm pools serve templates) wrapped in',
    "the client's `Sandbox`. **Warm**: the same REST create with a pool of the template holding",
    `${N.replicas} ready members; before each sample the pool is refilled and the engine quiet (not timed); the keeper`,
    'refills the pool right after the claim, i.e. while the first command runs, as it would for a user.',
    "**Exec round trip:** `run('true')` on one ready sandbox, one after the other; with the `ws` package installed (it is",
    "here) the client opens a WebSocket per command (`…/execute/ws`); without it, it POSTs `…/execute` (measured through the",
    "client's own `_runHttp`). The client asks for `/bin/bash`, which busybox lacks: the agent falls back to `/bin/sh`.",
    '**failed:** commands that came back cut off (`the command was cut off`); they are left out of the figures, and a',
    'create sample whose first command failed is taken again.',
    `**Image:** busybox (Debian's static busybox, one layer, ~2 MB) from a local registry. **Engine:** Podman ${versions.podman}`,
    `(\`podman system service\`, Docker API; runc ${versions.runc}), private to the benchmark, storage ${podman.storage === 'btrfs-loop' ? 'btrfs on a loop device (storage quotas enforced: the snapshot\'s 1 GiB `fs_capacity_bytes` is applied; templates set no storage limit)' : 'overlay (no storage quotas: `storageQuota: ignore`)'}.`,
    '',
    `**Anchor:** E2B (a hosted service) cannot run here; its published sandbox start is ~${E2B_PUBLISHED_MS} ms — a published figure,`,
    '**not measured here**. Measured instead, in the same run on the same engine: `podman run --rm --network none <image> true`',
    '(create, start, run, remove: a CLI process per sample) and `podman exec <ctr> true` into a running container.',
    '',
    `**Machine:** ${machine}; a 2-core machine shared with other jobs (load average after the run: ${loadAfter}). **Revision:** ${rev}.`,
    '',
    `**Command:** \`${command}\` (after \`npx turbo run build\`; as root), run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.`,
    '',
    '| what | n | failed | p50 ms | p95 ms | min ms | max ms | target (issue) |',
    '|---|---:|---:|---:|---:|---:|---:|---|',
    row(`warm: pool → first \`run('true')\` (${servedFromPool('warm')} of ${N.warm} served from the pool)`, results.warm.map((r) => r.total), TARGET.warm, 'warm'),
    row(`warm, the pool's refill held until the sample is over (bench-only variant, not how Berth runs; ${servedFromPool('warmHeld')} of ${N.warm} from the pool)`, results.warmHeld.map((r) => r.total), undefined, 'warmHeld'),
    row("cold: `createSandbox(snapshot)` → first `run('true')`", results.coldSnapshot.map((r) => r.total), TARGET.cold, 'coldSnapshot'),
    row("cold: `POST /boxes {template_name}` → first `run('true')`", results.coldTemplate.map((r) => r.total), TARGET.cold, 'coldTemplate'),
    row("exec round trip: `run('true')` (WebSocket per command, the client's default)", execs.ws, TARGET.exec, 'ws'),
    row("exec round trip: `POST …/execute` of `true` (the client without `ws`)", execs.http, TARGET.exec, 'http'),
    row("floor: `driver.exec('true')` in the manager's process (agent socket only; no gateway, gRPC or client)", execs.agent, undefined, 'agent'),
    row("the same, closing stdin right after the spawn (as the manager does for the client's commands)", execs.agentClosing, undefined, 'agentClosing'),
    row('engine directly: `podman run --rm --network none <image> true`', podmanRun),
    row('engine directly: `podman exec <ctr> true`', podmanExec),
    `| E2B sandbox start (published, **not measured here**) | | | ~${E2B_PUBLISHED_MS} | | | | |`,
    '',
    'Where create-to-first-command goes, median ms per sample (spans timed inside the platform process around the',
    "driver's calls, the engine's calls, and the manager's `create`/`wait until ready`; spans overlap — the manager's",
    "include the driver's, the driver's include the engine's. Spans of the pool keeper's refill that ended before the first",
    "command's result would count too; the refill (a cold create, ~the cold column's `driver.create`) starts at the claim",
    'and runs on the same 2 CPUs while the first command runs):',
    '',
    '| span | cold, snapshot | cold, template | warm | warm, refill held |',
    '|---|---:|---:|---:|---:|',
    ...phaseKeys.map((k) => `| ${k} | ${cell(coldSnap[k])} | ${cell(cold[k])} | ${cell(warm[k])} | ${cell(warmHeld[k])} |`),
    '',
    "Where an exec round trip goes, median ms (driver spans inside the platform process, per `run('true')`):",
    '',
    '| span | WebSocket | HTTP |',
    '|---|---:|---:|',
    ...execPhases.map(([what, label]) => `| ${what} (${label}) | ${ms(median(execSpan(execs.wsSpans, what)))} | ${ms(median(execSpan(execs.httpSpans, what)))} |`),
    `| rest: client, gateway, gRPC, manager (total p50 − the two spans) | ${ms(median(execs.ws) - median(execSpan(execs.wsSpans, execPhases[0][0])) - median(execSpan(execs.wsSpans, execPhases[1][0])))} | ${ms(median(execs.http) - median(execSpan(execs.httpSpans, execPhases[0][0])) - median(execSpan(execs.httpSpans, execPhases[1][0])))} |`,
    '',
    END,
  ].join('\n');
  log(`\n${section}`);
  if (!opts['no-write']) {
    writeSection(section, BEGIN, END);
    log(`written to ${BENCHMARKS_DOC}`);
  }
} finally {
  await teardown();
}
