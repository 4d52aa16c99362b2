/**
 * The exec bridge of the gateway (WebSocket and HTTP /execute ⇄ the Execute bidi call) against a
 * scripted SandboxDataService: frames exactly as the `langsmith/sandbox` client reads them
 * (started first, stdout/stderr with byte offsets, exit, typed errors), input and kill passed on,
 * a malformed frame answered with an error frame and a close, 1001 when the gateway shuts down,
 * and the client's own `run` over both paths. The real manager's sessions (get-or-create,
 * retention, offsets) are tested in the sandbox-manager; here only the translation is.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { InvalidArgumentError, NotFoundError } from '@berth/errors';
import { silentLogger } from '@berth/log';
import { SandboxDataService, SandboxService, SandboxStatus, type ExecuteRequest } from '@berth/proto';
import { createRpcServer, type RpcServer, type ServiceImplementation } from '@berth/rpc';
import { createTestDatabase, until, type TestDatabase } from '@berth/testing';
import { SandboxClient } from 'langsmith/sandbox';
import WebSocket from 'ws';
import { start, type RunningGateway } from '../../index.js';
import { testGatewayConfig } from '../../__tests__/test-config.js';

type Json = Record<string, any>;

const SANDBOX_ID = '0193a6c4-7b1e-7c3d-8e9f-0123456789ab';

let testDb: TestDatabase;
let fake: RpcServer;
let address: string;
let gateway: RunningGateway;
let key: string;
let tenantId: string;

/** Commands the scripted manager knows: echo (output, exit 3), cat (echoes input), sleep (never ends), timeout. */
async function* execute(requests: AsyncIterable<ExecuteRequest>) {
  const iterator = requests[Symbol.asyncIterator]();
  const first = (await iterator.next()).value as ExecuteRequest;
  if (first.kind.case === 'reconnect') {
    yield { kind: { case: 'error' as const, value: { errorType: 'CommandNotFound', message: `no command ${first.kind.value.commandId}` } } };
    return;
  }
  if (first.kind.case !== 'execute') return;
  const start = first.kind.value;
  if (start.tenantId !== tenantId || start.sandboxId !== SANDBOX_ID) throw new NotFoundError('sandbox not found');
  yield { kind: { case: 'started' as const, value: { commandId: start.commandId, pid: 42 } } };
  const out = (stream: string, data: string, offset: number) => ({ kind: { case: 'output' as const, value: { stream, data, offset: BigInt(offset) } } });
  const exit = (exitCode: number) => ({ kind: { case: 'exit' as const, value: { exitCode, oomKilled: false } } });
  switch (start.command) {
    case 'echo':
      yield out('stdout', 'héllo ', 0);
      yield out('stdout', 'wörld\n', 7);
      yield out('stderr', 'warn', 0);
      yield exit(3);
      return;
    case 'timeout':
      yield out('stdout', 'partial', 0);
      yield { kind: { case: 'error' as const, value: { errorType: 'CommandTimeout', message: 'killed after 1 seconds' } } };
      return;
    case 'cat': {
      let offset = 0;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        const kind = next.value.kind;
        if (kind.case === 'input') {
          yield out('stdout', kind.value.data, offset);
          offset += Buffer.byteLength(kind.value.data);
        } else if (kind.case === 'kill') {
          yield exit(137);
          return;
        } else if (kind.case === 'closeStdin') {
          yield exit(0);
          return;
        }
      }
      return;
    }
    default:
      await new Promise(() => undefined); // sleep: until the call is cancelled
  }
}

function sandboxMessage() {
  return { id: SANDBOX_ID, tenantId, name: 'box', status: SandboxStatus.READY, labels: {} };
}

async function startFake(): Promise<void> {
  fake = createRpcServer({ logger: silentLogger(), shutdownTimeoutMs: 200 });
  const getSandbox = async (request: { ref?: { tenantId: string; id?: string; name?: string } }) => {
    const ref = request.ref;
    if (ref?.tenantId !== tenantId || (ref.id !== SANDBOX_ID && ref.name !== 'box')) throw new NotFoundError('sandbox not found');
    return { sandbox: sandboxMessage() };
  };
  // Methods this test does not script answer UNIMPLEMENTED-like errors.
  const unscripted = (service: typeof SandboxService | typeof SandboxDataService) =>
    Object.fromEntries(service.methods.map((m) => [m.localName, () => Promise.reject(new InvalidArgumentError(`${m.name} is not scripted`))]));
  fake.add(SandboxService, { ...unscripted(SandboxService), getSandbox } as unknown as ServiceImplementation<typeof SandboxService>);
  fake.add(SandboxDataService, { ...unscripted(SandboxDataService), execute } as unknown as ServiceImplementation<typeof SandboxDataService>);
  address = (await fake.listen('127.0.0.1', 0)).address;
}

async function startGateway(): Promise<RunningGateway> {
  const config = testGatewayConfig(testDb.url, '127.0.0.1:1');
  return start({ ...config, migrate: false, services: { ...config.services, 'sandbox-manager': address } }, silentLogger());
}

/** A socket on the sandbox's exec endpoint with the frames it received, the close code, and a way to wait for frames. */
async function openSocket(gw: RunningGateway = gateway) {
  const frames: Json[] = [];
  const ws = new WebSocket(`${gw.url.replace('http', 'ws')}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/execute/ws`, { headers: { 'x-api-key': key } });
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  ws.on('message', (data) => frames.push(JSON.parse(data.toString()) as Json));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const framesUntil = (done: (f: Json[]) => boolean) => until('the frames', () => (done(frames) ? frames : undefined), 10_000, 10);
  return { ws, frames, closed, framesUntil, send: (frame: Json) => ws.send(JSON.stringify(frame)) };
}

beforeAll(async () => {
  testDb = await createTestDatabase('gw_sbx_ws');
  const config = testGatewayConfig(testDb.url, '127.0.0.1:1');
  // The first start migrates; the fake needs the tenant's id.
  const first = await start(config, silentLogger());
  const tenant = await first.store.createTenant({ name: 'ws' });
  tenantId = tenant.id;
  key = (await first.store.createApiKey({ tenantId: tenant.id, name: 'ws', role: 'member' })).key;
  await first.close();
  await startFake();
  gateway = await startGateway();
}, 60_000);
afterAll(async () => {
  await gateway?.close();
  await fake?.close();
  await testDb?.drop();
});

describe('WebSocket exec', () => {
  it('sends started first, output with byte offsets, then exit, and closes normally', async () => {
    const socket = await openSocket();
    socket.send({ type: 'execute', command: 'echo', command_id: 'c1', timeout_seconds: 5, close_stdin: true });
    expect(await socket.closed).toBe(1000);
    expect(socket.frames).toEqual([
      { type: 'started', command_id: 'c1', pid: 42 },
      { type: 'stdout', data: 'héllo ', offset: 0 },
      { type: 'stdout', data: 'wörld\n', offset: 7 },
      { type: 'stderr', data: 'warn', offset: 0 },
      { type: 'exit', exit_code: 3 },
    ]);
  });

  it('passes input and kill on', async () => {
    const socket = await openSocket();
    socket.send({ type: 'execute', command: 'cat', command_id: 'c2' });
    await socket.framesUntil((f) => f.length >= 1);
    socket.send({ type: 'input', data: 'abc' });
    socket.send({ type: 'input', data: 'dé' });
    await socket.framesUntil((f) => f.length >= 3);
    socket.send({ type: 'kill' });
    expect(await socket.closed).toBe(1000);
    expect(socket.frames).toEqual([
      { type: 'started', command_id: 'c2', pid: 42 },
      { type: 'stdout', data: 'abc', offset: 0 },
      { type: 'stdout', data: 'dé', offset: 3 },
      { type: 'exit', exit_code: 137 },
    ]);
  });

  it('relays the manager’s errors as error frames', async () => {
    const socket = await openSocket();
    socket.send({ type: 'reconnect', command_id: 'gone', stdout_offset: 0, stderr_offset: 0 });
    await socket.closed;
    expect(socket.frames).toEqual([{ type: 'error', error_type: 'CommandNotFound', error: 'no command gone' }]);
  });

  it('answers a malformed frame with an error frame and closes', async () => {
    for (const bad of [
      'not json',
      JSON.stringify({ type: 'input', data: 'x' }),
      JSON.stringify({ type: 'execute', command: 'echo' }),
      JSON.stringify({ type: 'execute', command: 'echo', command_id: 'c', pty: true }),
    ]) {
      const socket = await openSocket();
      socket.ws.send(bad);
      expect({ bad, code: await socket.closed }).toEqual({ bad, code: 1008 });
      expect(socket.frames).toEqual([{ type: 'error', error_type: 'InvalidMessage', error: expect.any(String) }]);
    }
  });

  it('refuses in an execute frame what POST /execute refuses, with the same reasons', async () => {
    const refusedByHttp: Json[] = [
      { env: { '1BAD': 'x' } },
      { env: { 'A=B': 'x' } },
      { env: { OK: 'x'.repeat(32_769) } },
      { run_config: { work_dir: '/tmp' }, env: { A: 'b' } },
      { run_config: { user: 'root' } },
      { run_config: { env_vars: { 'bad name': 'x' } } },
      { cwd: '' },
      { shell: '' },
    ];
    for (const fields of refusedByHttp) {
      const http = await fetch(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/execute`, {
        method: 'POST',
        headers: { 'x-api-key': key, 'content-type': 'application/json' },
        body: JSON.stringify({ command: 'echo', ...fields }),
      });
      expect({ fields, status: http.status }).toEqual({ fields, status: 422 });
      const { detail } = (await http.json()) as { detail: { loc: (string | number)[]; msg: string }[] };
      const socket = await openSocket();
      socket.send({ type: 'execute', command: 'echo', command_id: 'refused', ...fields });
      expect({ fields, code: await socket.closed }).toEqual({ fields, code: 1008 });
      expect(socket.frames).toEqual([{ type: 'error', error_type: 'InvalidMessage', error: expect.stringMatching(/^Malformed frame: /) }]);
      // Each reason HTTP gives is in the frame's refusal, at the same place.
      for (const { loc, msg } of detail) expect(socket.frames[0]!.error).toContain(`${loc.slice(1).join('.')}: ${msg}`);
    }
    // And the timeout has the same bounds under the frame's name for it.
    const socket = await openSocket();
    socket.send({ type: 'execute', command: 'echo', command_id: 'long', timeout_seconds: 24 * 3600 + 1 });
    expect(await socket.closed).toBe(1008);
  });

  it('closes open sockets with 1001 when the gateway shuts down', async () => {
    const other = await startGateway();
    const socket = await openSocket(other);
    socket.send({ type: 'execute', command: 'sleep', command_id: 'c3' });
    await socket.framesUntil((f) => f.length >= 1);
    await other.close();
    expect(await socket.closed).toBe(1001);
  });
});

describe('HTTP exec', () => {
  const execute = async (json: Json) => {
    const res = await fetch(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}/execute`, {
      method: 'POST',
      headers: { 'x-api-key': key, 'content-type': 'application/json' },
      body: JSON.stringify(json),
    });
    return { status: res.status, body: (await res.json()) as Json };
  };

  it('answers the output and exit code', async () => {
    expect(await execute({ command: 'echo' })).toEqual({ status: 200, body: { stdout: 'héllo wörld\n', stderr: 'warn', exit_code: 3 } });
  });

  it('answers a command timeout with 408 CommandTimeout and the output so far', async () => {
    expect(await execute({ command: 'timeout', timeout: 1 })).toEqual({
      status: 408,
      body: { detail: { error: 'CommandTimeout', message: 'killed after 1 seconds', stdout: 'partial', stderr: '' } },
    });
  });
});

describe('the langsmith SandboxClient', () => {
  it('runs commands through the gateway, over the WebSocket and with streaming callbacks', async () => {
    const client = new SandboxClient({ apiEndpoint: `${gateway.url}/api/v2/sandboxes`, apiKey: key });
    const sandbox = await client.getSandbox('box');
    expect(sandbox.dataplane_url).toBe(`${gateway.url}/api/v2/sandboxes/dataplane/${SANDBOX_ID}`);
    const result = await sandbox.run('echo', { timeout: 5 });
    expect({ stdout: result.stdout, stderr: result.stderr, exitCode: result.exit_code }).toEqual({ stdout: 'héllo wörld\n', stderr: 'warn', exitCode: 3 });
    const seen: string[] = [];
    const streamed = await sandbox.run('echo', { timeout: 5, onStdout: (s: string) => seen.push(s) });
    expect({ seen, exitCode: streamed.exit_code }).toEqual({ seen: ['héllo ', 'wörld\n'], exitCode: 3 });
  });
});
