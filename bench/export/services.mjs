/**
 * The platform's trace services for a benchmark: the export-worker and the gateway as processes of
 * their own (their `dist/main.js`, as in Kubernetes) on a given Postgres, with their output in log
 * files of a temp folder. Shared by bench/export/ingest.mjs and bench/export/trace-api.mjs.
 */
import { spawn } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export function freePort() {
  return new Promise((done, fail) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => done(port));
    });
    server.on('error', fail);
  });
}

export async function until(check, what, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** CPU seconds (user + system) a live process has used so far. */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Peak resident set (VmHWM) of a live process, in MiB. */
export function peakRssMiB(pid) {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmHWM:'));
  return Number(line.split(/\s+/)[1]) / 1024;
}

/**
 * Starts the export-worker and the gateway (`root` is the repository) on `connectionString`;
 * answers the gateway's URL, both processes, and `stop()`.
 * `BENCH_SERVICE_NODE_OPTIONS="--cpu-prof --cpu-prof-dir=DIR"` profiles them.
 */
export async function startTraceServices({ root, temp, connectionString }) {
  let stopping = false;
  const service = (name, env) => {
    const out = openSync(join(temp, `${name}.log`), 'a');
    const proc = spawn(process.execPath, [...(process.env.BENCH_SERVICE_NODE_OPTIONS ?? '').split(' ').filter(Boolean), join(root, `services/${name}/dist/main.js`)], {
      cwd: root,
      env: { PATH: process.env.PATH, ...env },
      stdio: ['ignore', out, out],
    });
    proc.on('exit', (code, signal) => {
      if (!stopping) console.error(`${name} exited (${code ?? signal}); see ${join(temp, `${name}.log`)}`);
    });
    return proc;
  };
  const [grpcPort, httpPort] = [await freePort(), await freePort()];
  const worker = service('export-worker', { DATABASE_URL: connectionString, BERTH_SECRET_KEY: randomBytes(32).toString('base64'), GRPC_PORT: String(grpcPort), LOG_LEVEL: 'warn' });
  const gateway = service('gateway', { DATABASE_URL: connectionString, GATEWAY_PORT: String(httpPort), EXPORT_WORKER_GRPC_ADDRESS: `127.0.0.1:${grpcPort}`, LOG_LEVEL: 'warn' });
  const stop = async () => {
    stopping = true;
    for (const child of [gateway, worker]) {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
    }
  };
  const url = `http://127.0.0.1:${httpPort}`;
  try {
    await until(async () => (await fetch(`${url}/readyz`)).ok, 'the gateway to be ready');
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, worker, gateway, stop };
}

/** Replaces the section between `begin` and `end` of the document `doc` (appends it when missing). */
export function writeSection(doc, begin, end, section) {
  const text = readFileSync(doc, 'utf8');
  const block = `${begin}\n${section}\n${end}`;
  writeFileSync(doc, text.includes(begin) ? text.replace(new RegExp(`${begin}[\\s\\S]*?${end}`), block) : `${text.trimEnd()}\n\n${block}\n`);
}
