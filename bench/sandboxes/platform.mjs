/**
 * bench/sandboxes, the platform under test: the sandbox-manager (container driver on the bench's
 * private Podman engine) and the gateway in one Node process, as `berth up` runs them, so the
 * benchmark's client never shares their event loop. Forked by run.mjs with its settings as JSON in
 * argv[2]; talks to it over IPC.
 *
 * For the breakdown of where the time goes, the container driver is built here and handed to the
 * manager as `driverInstance`, with timers around its calls: the driver's public operations, the
 * engine calls it makes (container create and start), the auth proxy's opening and the wait for the
 * agent's first answer, and the manager's own `create`/`waitSettled` of a sandbox. Timers only
 * record (`performance.now()` pairs); nothing changes what the code does.
 *
 * IPC, request `{id, op, ...}` → answer `{id, result}` or `{id, error}`:
 * `marks` (take the spans recorded since the last call), `agentExec` (n × driver.exec('true') on one
 * instance, the floor without gateway and gRPC; optionally closing stdin at once), `holdRefill`
 * (`{hold}`: pause the warm pools' refill), `close`.
 * First message sent: `{ready: {url, address}}`.
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createDatabase } from '@berth/db';
import { start as startGateway } from '@berth/gateway';
import { createLogger } from '@berth/log';
import { migrateSandboxManager, SANDBOX_SCHEMA, start as startManager } from '@berth/sandbox-manager';
import { SecretBox } from '@berth/secret-box';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
// Not exported by the package: the bench builds the driver itself to time its calls.
const { buildDriver } = await import(pathToFileURL(join(ROOT, 'services/sandbox-manager/dist/drivers/build-driver.js')).href);

const settings = JSON.parse(process.argv[2]);
mkdirSync(settings.logDir, { recursive: true });
const logger = (name) => createLogger({ name, level: settings.logLevel, destination: createWriteStream(join(settings.logDir, `${name}.log`), { flags: 'a' }) });

/** Spans recorded since the last `marks` call: {what, instance?, ms}. */
let spans = [];
function timed(what, fn, instanceOf = () => undefined) {
  return async function (...args) {
    const started = performance.now();
    try {
      return await fn.apply(this, args);
    } finally {
      spans.push({ what, instance: instanceOf(args), ms: performance.now() - started });
    }
  };
}

function instrument(driver) {
  const byInstance = (args) => (typeof args[0] === 'string' ? args[0] : args[0]?.instance);
  for (const op of ['create', 'start', 'claim', 'inspect', 'remove']) driver[op] = timed(`driver.${op}`, driver[op].bind(driver), byInstance);
  // exec resolves once the agent has spawned the command; the span ends when it has exited.
  const exec = driver.exec.bind(driver);
  driver.exec = async (instance, spec) => {
    const started = performance.now();
    const proc = await exec(instance, spec);
    const spawned = performance.now();
    spans.push({ what: 'driver.exec: agent spawned', instance, ms: spawned - started });
    proc.exited.then(
      () => spans.push({ what: 'driver.exec: spawn to exit', instance, ms: performance.now() - spawned }),
      () => undefined,
    );
    return proc;
  };
  // Private parts of ContainerDriver (TypeScript-private, plain properties at run time): the
  // engine's create and start, the proxy's opening, and the wait for the agent's first answer.
  const docker = driver.docker;
  const createContainer = docker.createContainer.bind(docker);
  docker.createContainer = timed('engine: container create', createContainer, (args) => args[0]?.name);
  const getContainer = docker.getContainer.bind(docker);
  docker.getContainer = (id) => {
    const container = getContainer(id);
    container.start = timed('engine: container start', container.start.bind(container), () => id);
    return container;
  };
  const proxy = driver.options.proxy;
  if (proxy) proxy.open = timed('auth proxy open', proxy.open.bind(proxy), byInstance);
  driver.waitReady = timed('agent: first answer after start', driver.waitReady.bind(driver), byInstance);
  return driver;
}

const managerConfig = {
  databaseUrl: settings.databaseUrl,
  secretKey: settings.secretKey,
  grpcHost: '127.0.0.1',
  grpcPort: 0,
  logLevel: settings.logLevel,
};
await migrateSandboxManager(settings.databaseUrl);
const driverDb = createDatabase({ connectionString: settings.databaseUrl, schema: SANDBOX_SCHEMA, max: 2 });
const managerLogger = logger('sandbox-manager');
const driver = instrument(await buildDriver(settings.driver, { db: driverDb.db, box: new SecretBox(settings.secretKey), logger: managerLogger }));
const manager = await startManager(
  {
    ...managerConfig,
    migrate: false,
    sandboxes: { driverInstance: driver, poolIntervalMs: settings.poolIntervalMs, insecureRegistries: [settings.registry], stopSandboxesOnClose: true },
  },
  managerLogger,
);
// `holdRefill` (a bench-only variant, labelled as such in the report): the pool keeper's passes do
// nothing while held, so a warm sample can be taken without the refill competing for the CPUs.
const { pools } = manager;
const refill = pools.refill.bind(pools);
let refillHeld = false;
pools.refill = () => (refillHeld ? Promise.resolve() : refill());
const { sandboxes } = manager;
sandboxes.create = timed('manager: create (row, claim or provision start)', sandboxes.create.bind(sandboxes));
sandboxes.waitSettled = timed('manager: wait until ready', sandboxes.waitSettled.bind(sandboxes));

const gateway = await startGateway(
  {
    databaseUrl: settings.databaseUrl,
    host: '127.0.0.1',
    port: 0,
    logLevel: settings.logLevel,
    queue: { kind: 'postgres', connectionString: settings.databaseUrl },
    services: { 'sandbox-manager': manager.address },
  },
  logger('gateway'),
);
const tenant = await gateway.store.createTenant({ name: 'bench' });
const { key } = await gateway.store.createApiKey({ tenantId: tenant.id, name: 'bench', role: 'admin' });

/**
 * n × `true` through the driver alone; with `closeStdin`, stdin is closed right after the spawn, as
 * the manager does for the client's commands. Answers the round trips of those that exited and
 * the errors of those that did not.
 */
async function agentExec(instance, n, closeStdin) {
  const ms = [];
  const errors = [];
  for (let i = 0; i < n; i += 1) {
    const started = performance.now();
    const proc = await driver.exec(instance, { command: 'true', shell: '/bin/sh', env: {} });
    if (closeStdin) proc.closeStdin();
    try {
      const exit = await proc.exited;
      if (exit.exitCode !== 0) throw new Error(`true exited with ${exit.exitCode}`);
      ms.push(performance.now() - started);
    } catch (error) {
      errors.push(error.message);
    }
  }
  return { ms, errors };
}

async function close() {
  await gateway.close();
  await manager.close();
  await driverDb.close();
}

process.on('message', async (message) => {
  try {
    let result;
    if (message.op === 'marks') {
      // Let exits already reported to the client land in the list first.
      await new Promise((r) => setImmediate(r));
      result = spans;
      spans = [];
    } else if (message.op === 'agentExec') {
      result = await agentExec(message.instance, message.n, message.closeStdin);
      spans = [];
    } else if (message.op === 'holdRefill') {
      refillHeld = message.hold;
      if (!refillHeld) pools.kick();
      result = true;
    } else if (message.op === 'close') {
      await close();
      result = true;
    } else throw new Error(`unknown op ${message.op}`);
    process.send({ id: message.id, result });
    if (message.op === 'close') process.disconnect();
  } catch (error) {
    process.send({ id: message.id, error: error.stack ?? String(error) });
  }
});
process.send({ ready: { url: gateway.url, apiKey: key } });
