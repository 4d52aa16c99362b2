#!/usr/bin/env node
/**
 * bench/deploy: time from `berth deploy` to DEPLOYED for the example project (examples/echo-agent),
 * first deploy and redeploys, on the embedded platform (`berth up`, local deployer) of this
 * machine. Writes the figures to docs/benchmarks.md (section bench:deploy).
 *
 * Each measurement is the wall time of one `berth deploy --json` process: pack, upload, build
 * (install with the lockfile's package manager, validate the graphs), start the revision's agent
 * server, health check, switch. A redeploy changes the graph's reply text, so its revision really
 * is new code. The first deploy installs dependencies from npm's local cache (warm: the repository
 * has the same packages); a redeploy with an unchanged lockfile reuses the installed tree.
 *
 * Then two rollbacks (`POST …/revisions/{revision_id}/redeploy`), timed from the request until the
 * new revision is DEPLOYED and the deployment URL answers with the earlier code: to the first
 * revision, whose build is still there (reused: no build step), and to the last redeploy after its
 * artifact folder was removed (built again: what every rollback did before builds were reused).
 *
 * Usage (after `make build`): node bench/deploy/run.mjs [--redeploys 3] [--no-write]
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync, chmodSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BENCHMARKS_DOC, writeSection } from '../doc-section.mjs';
import { timedDeploy } from './berth-deploy.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BERTH = join(ROOT, 'cli/dist/bin.js');
const BEGIN = '<!-- bench:deploy:begin -->';
const END = '<!-- bench:deploy:end -->';
const TARGET = { first: 15, redeploy: 10 };

const { values: opts } = parseArgs({ options: { redeploys: { type: 'string', default: '3' }, 'no-write': { type: 'boolean', default: false } } });
const REDEPLOYS = Number(opts.redeploys);
if (!Number.isInteger(REDEPLOYS) || REDEPLOYS < 1 || REDEPLOYS > 20) throw new Error('--redeploys takes 1-20');
if (!existsSync(BERTH)) throw new Error('cli/dist/bin.js is missing: run `make build` first');

const temp = mkdtempSync(join(os.tmpdir(), 'berth-bench-deploy-'));
// As root the platform's Postgres runs as the postgres user, which must be able to enter here.
chmodSync(temp, 0o755);
const stateDir = join(temp, 'state');
const project = join(temp, 'echo-agent');
const env = { ...process.env, BERTH_STATE_DIR: stateDir, BERTH_PORT: '0', LOG_LEVEL: 'warn' };
delete env.DATABASE_URL;
delete env.REDIS_URL;
delete env.BERTH_API_KEY;
delete env.BERTH_HOST_URL;

function berth(args, extraEnv = {}, cwd = ROOT) {
  const result = spawnSync(process.execPath, [BERTH, ...args], { cwd, env: { ...env, ...extraEnv }, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`berth ${args.join(' ')} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  return result.stdout;
}

/** One `berth deploy --json` in the project, timed. */
const deploy = (credentials) => timedDeploy(BERTH, project, { ...env, BERTH_API_KEY: credentials.api_key, BERTH_HOST_URL: credentials.gateway_url });

async function reply(credentials, url, text) {
  const response = await fetch(`${url}/runs/wait`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': credentials.api_key },
    body: JSON.stringify({ assistant_id: 'echo', input: { messages: [{ role: 'user', content: text }] } }),
  });
  const body = await response.json();
  return body.messages?.at(-1)?.content;
}

/** A rollback to `revisionId`, timed until its new revision is DEPLOYED and the URL answers `expected`; with its build log. */
async function timedRollback(credentials, deploymentId, revisionId, url, expected) {
  const api = async (path, method = 'GET') => {
    const response = await fetch(`${credentials.gateway_url}${path}`, { method, headers: { 'x-api-key': credentials.api_key } });
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
    return response.json();
  };
  const base = `/v2/deployments/${deploymentId}/revisions`;
  const started = performance.now();
  const rollback = (await api(`${base}/${revisionId}/redeploy`, 'POST')).latest_revision_id;
  for (;;) {
    const { status, status_message } = await api(`${base}/${rollback}`);
    if (status === 'DEPLOYED') break;
    if (/FAILED|INTERRUPTED/.test(status)) throw new Error(`the rollback's revision is ${status}: ${status_message}`);
    await sleep(50);
  }
  const text = await reply(credentials, url, 'hi');
  const seconds = (performance.now() - started) / 1000;
  if (text !== expected) throw new Error(`after the rollback the graph answered ${JSON.stringify(text)}`);
  const buildLog = (await api(`${base}/${rollback}/logs?type=build&limit=1`)).logs.map((l) => l.message);
  return { seconds, firstBuildLine: buildLog[0] ?? '' };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const s = (x) => x.toFixed(1);

let up = false;
try {
  cpSync(join(ROOT, 'examples/echo-agent'), project, { recursive: true, filter: (p) => !p.includes('node_modules') });
  console.log('starting the platform (berth up)…');
  berth(['up']);
  up = true;
  const credentials = JSON.parse(readFileSync(join(stateDir, 'credentials.json'), 'utf8'));

  console.log('first deploy…');
  const first = await deploy(credentials);
  const url = first.result.deployment_url;
  const answer = await reply(credentials, url, 'hi');
  if (answer !== 'echo: hi') throw new Error(`the deployed graph answered ${JSON.stringify(answer)}`);
  console.log(`  ${s(first.seconds)} s`);

  const redeploys = [];
  let lastRevision = first.result.revision_id;
  const graphFile = join(project, 'src/graph.ts');
  const original = readFileSync(graphFile, 'utf8');
  for (let i = 1; i <= REDEPLOYS; i += 1) {
    writeFileSync(graphFile, original.replace('AIMessage(`echo: ', `AIMessage(\`echo v${i + 1}: `));
    const run = await deploy(credentials);
    const text = await reply(credentials, url, 'hi');
    if (text !== `echo v${i + 1}: hi`) throw new Error(`after redeploy ${i} the graph answered ${JSON.stringify(text)}`);
    redeploys.push(run.seconds);
    lastRevision = run.result.revision_id;
    console.log(`redeploy ${i}: ${s(run.seconds)} s`);
  }

  const deploymentId = first.result.deployment_id;
  console.log('rollback to the first revision (its build reused)…');
  const reused = await timedRollback(credentials, deploymentId, first.result.revision_id, url, 'echo: hi');
  if (!reused.firstBuildLine.startsWith('reusing the build of revision')) throw new Error(`the rollback built: ${reused.firstBuildLine}`);
  console.log(`  ${s(reused.seconds)} s (${reused.firstBuildLine})`);
  // Each build goes to <artifacts>/<deployment>/<revision>-<random>.
  const artifacts = join(stateDir, 'artifacts', deploymentId);
  for (const name of readdirSync(artifacts).filter((n) => n.startsWith(lastRevision))) rmSync(join(artifacts, name), { recursive: true, force: true });
  console.log('rollback to the last redeploy, its build removed (built again)…');
  const rebuilt = await timedRollback(credentials, deploymentId, lastRevision, url, `echo v${REDEPLOYS + 1}: hi`);
  if (!rebuilt.firstBuildLine.includes('building again')) throw new Error(`the rollback did not build: ${rebuilt.firstBuildLine}`);
  console.log(`  ${s(rebuilt.seconds)} s (${rebuilt.firstBuildLine})`);

  const rev = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout.trim();
  const verdict = (value, target) => (value <= target ? 'met' : '**missed**');
  const section = [
    BEGIN,
    '## Deploy: `berth deploy` to DEPLOYED (`bench/deploy`)',
    '',
    'Wall time of one `berth deploy --json` in a copy of `examples/echo-agent` against the embedded platform (`berth up`,',
    'local deployer): pack, upload, build (install with the lockfile, validate the graphs in a child process), start the',
    "revision's agent server, health check, switch traffic. Every redeploy changes the graph's reply and checks that the",
    'deployment URL answers with the new text. The first deploy installs from npm\'s local cache; redeploys with an',
    'unchanged lockfile reuse the installed dependency tree. A rollback (`POST …/revisions/{revision_id}/redeploy`, the',
    "console's Redeploy) is timed from the request until its revision is DEPLOYED and the URL answers with the earlier",
    "code: with the earlier revision's build still there it is deployed as it is (no build step); with the build removed",
    'it is built again, as every rollback was before builds were reused.',
    '',
    `**Machine:** ${os.cpus().length} CPUs, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}. **Revision:** ${rev}.`,
    '',
    `**Command:** \`node bench/deploy/run.mjs --redeploys ${REDEPLOYS}\` (or \`make bench\`), run ${new Date().toISOString().replace(/\.\d+Z$/, 'Z')}.`,
    '',
    '| step | seconds | target | |',
    '|---|---:|---:|---|',
    `| first deploy | ${s(first.seconds)} | ≤ ${TARGET.first} | ${verdict(first.seconds, TARGET.first)} |`,
    `| redeploy (median of ${REDEPLOYS}: ${redeploys.map(s).join(', ')}) | ${s(median(redeploys))} | ≤ ${TARGET.redeploy} | ${verdict(median(redeploys), TARGET.redeploy)} |`,
    `| rollback, the earlier build reused | ${s(reused.seconds)} | | |`,
    `| rollback, the earlier build removed (built again) | ${s(rebuilt.seconds)} | | |`,
    '',
    END,
  ].join('\n');
  console.log(`\n${section}`);
  if (!opts['no-write']) {
    writeSection(section, BEGIN, END);
    console.log(`written to ${BENCHMARKS_DOC}`);
  }
} finally {
  if (up) {
    try {
      berth(['down']);
    } catch (error) {
      console.error(error.message);
    }
  }
  rmSync(temp, { recursive: true, force: true });
}
