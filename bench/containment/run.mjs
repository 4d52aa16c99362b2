#!/usr/bin/env node
/**
 * bench/containment: what running deployments in containers costs, against OS-user mode, in one
 * run on this machine (as root). Two fresh `berth up` platforms run side by side (each its own state
 * folder): one with the private Podman engine (agent servers in containers), one with
 * BERTH_SANDBOXES=off (no engine: agent servers as OS users). Then:
 *
 * - deploy time: the wall time of `berth deploy --json` of examples/echo-agent, first (installing
 *   from npm's cache, warmed before by an `npm ci` of the project) and again with new code (the
 *   installed tree reused);
 * - per-run latency: `POST {deployment_url}/runs/wait` on the echo graph through each gateway, as a
 *   client of the deployment sees it, the two platforms' runs interleaved one by one (alternating
 *   which goes first) so that both see the same machine; nearest-rank percentiles, and the median of
 *   the paired differences.
 *
 * Writes the figures to docs/benchmarks.md (section bench:containment).
 *
 * Usage (as root, after `make build`): node bench/containment/run.mjs [--runs 500] [--warmup 50] [--no-write]
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { timedDeploy } from '../deploy/berth-deploy.mjs';
import { BENCHMARKS_DOC, writeSection } from '../doc-section.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BERTH = join(ROOT, 'cli/dist/bin.js');
const BEGIN = '<!-- bench:containment:begin -->';
const END = '<!-- bench:containment:end -->';
const TARGET = { deploySeconds: 15, addedP50Ms: 1 };
const MODES = [
  { name: 'OS users', env: { BERTH_SANDBOXES: 'off' }, isolation: /OS user/ },
  { name: 'containers', env: { BERTH_SANDBOXES: 'on' }, isolation: /container/ },
];

const { values: opts } = parseArgs({
  options: { runs: { type: 'string', default: '500' }, warmup: { type: 'string', default: '50' }, 'no-write': { type: 'boolean', default: false } },
});
const RUNS = Number(opts.runs);
const WARMUP = Number(opts.warmup);
if (process.getuid?.() !== 0) throw new Error('containers need root: run this as root');
if (!existsSync(BERTH)) throw new Error('cli/dist/bin.js is missing: run `make build` first');

const temp = mkdtempSync(join(os.tmpdir(), 'berth-bench-containment-'));
// As root the platform's Postgres and the deployments' users must be able to enter here.
chmodSync(temp, 0o755);
const base = { ...process.env, BERTH_PORT: '0', LOG_LEVEL: 'warn' };
for (const name of ['DATABASE_URL', 'REDIS_URL', 'BERTH_API_KEY', 'BERTH_HOST_URL']) delete base[name];

function berth(args, env, cwd = ROOT) {
  const result = spawnSync(process.execPath, [BERTH, ...args], { cwd, env, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`berth ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** One `berth deploy --json` in the project, timed: seconds and the deployment URL. */
async function deploy(env, project) {
  const { seconds, result } = await timedDeploy(BERTH, project, env);
  return { seconds, url: result.deployment_url };
}

async function run(url, apiKey) {
  const response = await fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
    body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'hi' }] } }),
  });
  const body = await response.json();
  if (response.status !== 200) throw new Error(`runs/wait answered ${response.status}: ${JSON.stringify(body)}`);
  return body.messages?.at(-1)?.content;
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

/** Starts the mode's platform and copies the project for it. */
function platform(mode) {
  const slug = mode.name.replace(/\W+/g, '-');
  const stateDir = join(temp, slug);
  const env = { ...base, ...mode.env, BERTH_STATE_DIR: stateDir };
  const project = join(temp, `project-${slug}`);
  cpSync(join(ROOT, 'examples/echo-agent'), project, { recursive: true, filter: (p) => !p.includes('node_modules') });
  console.log(`${mode.name}: berth up…`);
  const isolation = /isolation\s+(.*)/.exec(berth(['up'], env))?.[1] ?? '';
  const up = { mode, env, project, down: () => berth(['down'], env) };
  if (!mode.isolation.test(isolation)) {
    up.down();
    throw new Error(`${mode.name}: berth up says "isolation ${isolation}"`);
  }
  const credentials = JSON.parse(readFileSync(join(stateDir, 'credentials.json'), 'utf8'));
  return { ...up, apiKey: credentials.api_key, client: { ...env, BERTH_API_KEY: credentials.api_key, BERTH_HOST_URL: credentials.gateway_url } };
}

/**
 * Seconds from the deploy log's "starting the agent server" to "the agent server answers /ok" of
 * the deployment's latest revision: what starting its process or container took, up to serving.
 */
function serverStart(p) {
  const entries = berth(['deploy', 'logs', '--type', 'deploy', '--json', '--limit', '1000'], p.client, p.project)
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line));
  const at = (pattern) => Date.parse(entries.findLast((e) => pattern.test(e.message)).timestamp);
  return (at(/^the agent server answers \/ok$/) - at(/^starting the agent server/)) / 1000;
}

/** Times one run; checks its answer. */
async function timedRun(p) {
  const started = performance.now();
  const text = await run(p.url, p.apiKey);
  const ms = performance.now() - started;
  if (text !== 'echo v2: hi') throw new Error(`${p.mode.name}: the deployment answered ${JSON.stringify(text)}`);
  return ms;
}

const platforms = [];
const loadBefore = os.loadavg()[0];
try {
  // Both first deploys install the project's dependencies: from a warm npm cache, not the first paying for it.
  const scratch = join(temp, 'npm-warm-up');
  cpSync(join(ROOT, 'examples/echo-agent'), scratch, { recursive: true, filter: (p) => !p.includes('node_modules') });
  spawnSync('npm', ['ci', '--no-audit', '--no-fund', '--ignore-scripts'], { cwd: scratch, stdio: 'ignore' });
  for (const mode of MODES) platforms.push(platform(mode));
  const [users, containers] = platforms;
  for (const p of [containers, users]) {
    const first = await deploy(p.client, p.project);
    Object.assign(p, { url: first.url, first: first.seconds, start: serverStart(p) });
    console.log(`${p.mode.name}: first deploy ${first.seconds.toFixed(1)} s, of which the agent server's start ${p.start.toFixed(1)} s`);
  }
  for (const p of [containers, users]) {
    const graph = join(p.project, 'src/graph.ts');
    writeFileSync(graph, readFileSync(graph, 'utf8').replace('AIMessage(`echo: ', 'AIMessage(`echo v2: '));
    p.redeploy = (await deploy(p.client, p.project)).seconds;
    console.log(`${p.mode.name}: redeploy ${p.redeploy.toFixed(1)} s`);
    p.latencies = [];
  }
  for (let i = 0; i < WARMUP; i += 1) for (const p of platforms) await timedRun(p);
  const differences = [];
  for (let i = 0; i < RUNS; i += 1) {
    const order = i % 2 === 0 ? [users, containers] : [containers, users];
    const ms = new Map();
    for (const p of order) ms.set(p, await timedRun(p));
    users.latencies.push(ms.get(users));
    containers.latencies.push(ms.get(containers));
    differences.push(ms.get(containers) - ms.get(users));
  }
  for (const p of platforms) {
    const sorted = [...p.latencies].sort((a, b) => a - b);
    Object.assign(p, { p50: percentile(sorted, 50), p95: percentile(sorted, 95), p99: percentile(sorted, 99) });
    console.log(`${p.mode.name}: runs p50 ${p.p50.toFixed(2)} ms, p95 ${p.p95.toFixed(2)} ms`);
  }
  const added = percentile([...differences].sort((a, b) => a - b), 50);
  const rev = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const verdict = (met) => (met ? 'met' : '**missed**');
  const f1 = (x) => x.toFixed(1);
  const f2 = (x) => x.toFixed(2);
  const section = [
    BEGIN,
    '## Containment: deployments in containers vs. as OS users (`bench/containment`)',
    '',
    'The same `examples/echo-agent` on two fresh `berth up` platforms side by side (as root): agent servers in containers',
    'on the private Podman engine, and as OS users (`BERTH_SANDBOXES=off`: no engine). Deploy: wall time of `berth deploy',
    '--json`, first deploy (dependencies installed from npm\'s cache, warmed before) and a redeploy with new code (installed',
    'tree reused). Runs: `POST {deployment_url}/runs/wait` on the echo graph through each gateway, the two platforms\' runs',
    `interleaved one by one (alternating which goes first), ${RUNS} each after ${WARMUP} of warm-up; nearest-rank percentiles,`,
    'and the median of the paired differences (container − OS user) as the cost. The gateway reaches a container on the',
    'listening socket the control plane passed in (no proxy hop); the agent server reaches its Postgres through the',
    'control plane\'s Unix-socket bridge. "The agent server\'s start" is the deploy log\'s time from starting its process',
    '(or its container) to its first answer on `/ok`: the part of a deploy that containers change. Each container also',
    'keeps a `podman run` attached to it on the host (about 36 MB of memory) and a conmon (2 MB).',
    '',
    `**Machine:** ${os.cpus().length} CPUs, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Linux ${os.release()}, Node ${process.version}, ${spawnSync('podman', ['--version'], { encoding: 'utf8' }).stdout.trim()}; load average ${loadBefore.toFixed(1)} at the start, ${os.loadavg()[0].toFixed(1)} at the end (other work on the machine disturbs both modes alike: their runs are interleaved). **Revision:** ${rev}.`,
    '',
    `**Command:** \`node bench/containment/run.mjs --runs ${RUNS} --warmup ${WARMUP}\` (as root), run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.`,
    '',
    '| mode | first deploy s | of which the agent server\'s start s | redeploy s | run p50 ms | run p95 ms | run p99 ms |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...platforms.map((r) => `| ${r.mode.name} | ${f1(r.first)} | ${f1(r.start)} | ${f1(r.redeploy)} | ${f2(r.p50)} | ${f2(r.p95)} | ${f2(r.p99)} |`),
    '',
    `- first deploy in a container: ${f1(containers.first)} s, target ≤ ${TARGET.deploySeconds} s: ${verdict(containers.first <= TARGET.deploySeconds)}`,
    `- run latency added by the container (median of the paired differences): ${f2(added)} ms, target ≤ ${TARGET.addedP50Ms} ms at p50: ${verdict(added <= TARGET.addedP50Ms)}`,
    '',
    END,
  ].join('\n');
  console.log(`\n${section}`);
  if (!opts['no-write']) {
    writeSection(section, BEGIN, END);
    console.log(`written to ${BENCHMARKS_DOC}`);
  }
} finally {
  for (const p of platforms) {
    try {
      p.down();
    } catch (error) {
      console.error(error.message);
    }
  }
  rmSync(temp, { recursive: true, force: true });
}
