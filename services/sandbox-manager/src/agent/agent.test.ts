/**
 * berth-sandboxd, the real binary, run as a host process (it is PID 1 only inside a container),
 * driven through AgentClient as the container driver drives it.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ManualClock } from '@berth/clock';
import { until } from '@berth/testing';
import { SandboxFileError, type ExitInfo, type SandboxProcess } from '../drivers/driver.js';
import { AgentClient, AgentError, AgentSocketReplacedError, agentBinaryPath, SpawnError } from './agent-client.js';
import { encodeFrame, encodeSpawn, FrameDecoder, FrameType } from './protocol.js';

let dir: string;
let agent: ChildProcess;
let client: AgentClient;
let echoServer: Server;
let proxyPort: number;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

beforeAll(async () => {
  const build = spawnSync(process.execPath, [fileURLToPath(new URL('../../agent/build.mjs', import.meta.url))], { encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`building berth-sandboxd failed: ${build.stderr}`);
  dir = mkdtempSync(join(tmpdir(), 'berth-sandboxd-'));
  // The auth proxy's place: an echo server that ends its side once the client has ended its own.
  echoServer = createServer({ allowHalfOpen: true }, (socket) => {
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => echoServer.listen(join(dir, 'proxy.sock'), resolve));
  proxyPort = await freePort();
  agent = spawn(
    agentBinaryPath(),
    ['--socket', join(dir, 'agent.sock'), '--proxy-listen', `127.0.0.1:${proxyPort}`, '--proxy-socket', join(dir, 'proxy.sock')],
    { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, BERTH_AGENT_TEST: 'from-agent' } },
  );
  client = new AgentClient(join(dir, 'agent.sock'));
  await client.waitReady(5000);
});

afterAll(async () => {
  agent?.kill('SIGTERM');
  await new Promise((resolve) => echoServer?.close(resolve));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Result extends ExitInfo {
  stdout: Buffer;
  stderr: Buffer;
}

async function collect(command: SandboxProcess): Promise<Result> {
  const out: Record<'stdout' | 'stderr', Buffer[]> = { stdout: [], stderr: [] };
  command.onOutput((stream, chunk) => out[stream].push(chunk));
  const exit = await command.exited;
  return { ...exit, stdout: Buffer.concat(out.stdout), stderr: Buffer.concat(out.stderr) };
}

async function run(command: string, options: { env?: Record<string, string>; cwd?: string; shell?: string } = {}): Promise<Result> {
  const shell = options.shell ?? '/bin/sh';
  return collect(await client.spawn({ argv: [shell, '-c', command], env: options.env ?? {}, cwd: options.cwd, fallbackArgv0: '/bin/sh' }));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('commands', () => {
  it('streams stdout and stderr separately and reports exit codes', async () => {
    const ok = await run('echo hello; echo oops >&2');
    expect(ok).toMatchObject({ exitCode: 0, oomKilled: false });
    expect(ok.signal).toBeUndefined();
    expect(ok.stdout.toString()).toBe('hello\n');
    expect(ok.stderr.toString()).toBe('oops\n');
    expect((await run('exit 3')).exitCode).toBe(3);
  });

  it('kill() ends the command and its background children', async () => {
    const command = await client.spawn({ argv: ['/bin/sh', '-c', 'sleep 100 & echo $!; sleep 100'], env: {} });
    const lines: string[] = [];
    command.onOutput((_stream, chunk) => lines.push(chunk.toString()));
    const background = Number(await until('the background pid', () => lines.join('').match(/^(\d+)\n/)?.[1], 5000, 10));
    expect(alive(background)).toBe(true);
    command.kill();
    command.kill();
    expect(await command.exited).toEqual({ exitCode: 137, signal: 'SIGKILL', oomKilled: false });
    expect(alive(command.pid)).toBe(false);
    await until('the background child to be gone', () => (alive(background) ? undefined : true), 5000, 10);
  });

  it('takes stdin and closes it', async () => {
    const cat = await client.spawn({ argv: ['cat'], env: {} });
    const result = collect(cat);
    cat.write(Buffer.from('round '));
    cat.write(Buffer.from('trip'));
    cat.closeStdin();
    cat.write(Buffer.from('ignored after close'));
    const { exitCode, stdout } = await result;
    expect(exitCode).toBe(0);
    expect(stdout.toString()).toBe('round trip');
  });

  it('carries 5 MB through stdin and back', async () => {
    const cat = await client.spawn({ argv: ['cat'], env: {} });
    const result = collect(cat);
    const bytes = randomBytes(5 * 1024 * 1024);
    cat.write(bytes);
    cat.closeStdin();
    const { stdout } = await result;
    expect(stdout.equals(bytes)).toBe(true);
  });

  it('reports the exit without waiting for a background child that keeps stdout open', async () => {
    // The child holds stdout for an hour, long past the test's timeout: an agent that waited for
    // it would never report the exit, and the test would fail on its timeout.
    const result = await run('sleep 3600 & echo $!');
    const child = Number(result.stdout.toString());
    try {
      expect(result).toMatchObject({ exitCode: 0 });
      expect(child).toBeGreaterThan(0);
    } finally {
      // Outside a container nothing ends it with its sandbox.
      if (child > 0 && alive(child)) process.kill(child);
    }
  });

  it('applies env over the agent environment, and cwd', async () => {
    mkdirSync(join(dir, 'work'), { recursive: true });
    const result = await run('echo "$BERTH_AGENT_TEST $GREETING $(pwd)"', { env: { GREETING: 'hi there' }, cwd: join(dir, 'work') });
    expect(result.stdout.toString()).toBe(`from-agent hi there ${join(dir, 'work')}\n`);
    const overridden = await run('echo $BERTH_AGENT_TEST', { env: { BERTH_AGENT_TEST: 'override' } });
    expect(overridden.stdout.toString()).toBe('override\n');
  });

  it('falls back to /bin/sh when the shell does not exist', async () => {
    const result = await run('echo fallback', { shell: '/bin/no-such-shell' });
    expect(result).toMatchObject({ exitCode: 0 });
    expect(result.stdout.toString()).toBe('fallback\n');
  });

  it('says clearly when the working directory or the program is missing', async () => {
    const cwd = join(dir, 'no-such-dir');
    await expect(run('true', { cwd })).rejects.toThrow(new SpawnError('not_found', `working directory ${cwd}: No such file or directory`));
    await expect(client.spawn({ argv: ['/bin/no-such-program'], env: {} })).rejects.toThrow('cannot run /bin/no-such-program: No such file or directory');
    await expect(run('echo a\0b')).rejects.toThrow(new SpawnError('bad_request', 'argv[2] must not contain a NUL character'));
  });

  it('delivers 5 MB of binary output intact, all before the exit', async () => {
    const payload = join(dir, 'payload.bin');
    const bytes = randomBytes(5 * 1024 * 1024);
    writeFileSync(payload, bytes);
    const result = await run(`cat ${payload}`);
    expect(result.exitCode).toBe(0);
    expect(result.stdout.length).toBe(bytes.length);
    expect(createHash('sha256').update(result.stdout).digest('hex')).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it('runs 100 commands at once', async () => {
    const results = await Promise.all(Array.from({ length: 100 }, async () => collect(await client.spawn({ argv: ['true'], env: {} }))));
    expect(results.every((r) => r.exitCode === 0)).toBe(true);
  });
});

describe('files', () => {
  it('writes and reads back every byte value, 20 MB, creating parents', async () => {
    const pattern = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const data = Buffer.alloc(20 * 1024 * 1024);
    for (let at = 0; at < data.length; at += 256) pattern.copy(data, at);
    const path = join(dir, 'deep', 'er', 'file.bin');
    await client.writeFile(path, data);
    expect(readFileSync(path).equals(data)).toBe(true);
    expect(statSync(join(dir, 'deep', 'er')).mode & 0o777).toBe(0o755);
    expect((await client.readFile(path)).equals(data)).toBe(true);
    await client.writeFile(path, Buffer.from('replaced'));
    expect((await client.readFile(path)).toString()).toBe('replaced');
    await client.writeFile(join(dir, 'empty'), Buffer.alloc(0));
    expect((await client.readFile(join(dir, 'empty'))).length).toBe(0);
  });

  it('stops reading a file past the limit the caller holds', async () => {
    const path = join(dir, 'big.bin');
    writeFileSync(path, randomBytes(200_000));
    await expect(client.readFile(path, 200_000)).resolves.toHaveLength(200_000);
    await expect(client.readFile(path, 100_000)).rejects.toMatchObject({
      kind: 'too_large',
      message: `${path}: larger than 100000 bytes, the most one read returns`,
    });
    expect(await client.ping()).toBe('berth-sandboxd 1');
  });

  it('reports missing files and directories by kind', async () => {
    await expect(client.readFile(join(dir, 'missing'))).rejects.toMatchObject({ name: 'SandboxFileError', kind: 'not_found' });
    await expect(client.readFile(dir)).rejects.toMatchObject({ kind: 'is_directory' });
    const error = await client.writeFile(dir, Buffer.from('x')).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxFileError);
    expect(error).toMatchObject({ kind: 'is_directory', message: `${dir}: Is a directory` });
  });
});

describe('the proxy bridge', () => {
  it('carries a TCP connection to the proxy socket and back, with half-close', async () => {
    const socket = connect(proxyPort, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const message = randomBytes(300 * 1024);
    socket.end(message);
    await new Promise<void>((resolve, reject) => {
      socket.on('end', resolve);
      socket.on('error', reject);
    });
    expect(Buffer.concat(received).equals(message)).toBe(true);
  });
});

describe('robustness', () => {
  it('closes only the connection that sends a malformed frame', async () => {
    const answers = async (frames: Buffer): Promise<number[]> => {
      const socket = connect(join(dir, 'agent.sock'));
      const decoder = new FrameDecoder();
      const types: number[] = [];
      socket.on('data', (chunk: Buffer) => types.push(...decoder.push(chunk).map((f) => f.type)));
      socket.write(frames);
      await new Promise<void>((resolve) => socket.on('close', () => resolve()));
      return types;
    };
    const huge = Buffer.alloc(5);
    huge.writeUInt32BE(0xffffffff, 0);
    expect(await answers(huge)).toEqual([FrameType.ERROR]);
    expect(await answers(encodeFrame(0x7f))).toEqual([FrameType.ERROR]);
    const truncatedSpawn = encodeFrame(FrameType.SPAWN, Buffer.from([0x61, 0, 0, 0, 9, 0x41]));
    expect(await answers(truncatedSpawn)).toEqual([FrameType.ERROR]);
    expect(await client.ping()).toBe('berth-sandboxd 1');
    expect((await run('echo still here')).stdout.toString()).toBe('still here\n');
  });

  it('kills a command whose client went away', async () => {
    // A crashed manager: the connection drops while the command runs.
    const socket = connect(join(dir, 'agent.sock'));
    const decoder = new FrameDecoder();
    socket.write(encodeSpawn({ argv: ['sleep', '100'], env: {} }));
    const pid = await new Promise<number>((resolve) =>
      socket.on('data', (chunk: Buffer) => {
        const started = decoder.push(chunk).find((f) => f.type === FrameType.STARTED);
        if (started) resolve(started.payload.readUInt32BE(0));
      }),
    );
    expect(alive(pid)).toBe(true);
    socket.destroy();
    await until('the command to be killed', () => (alive(pid) ? undefined : true), 5000, 10);
  });

  it('dials only the socket it was pinned to, and never through a symlink', async () => {
    const pin = await client.identify();
    expect(await new AgentClient(join(dir, 'agent.sock'), { pin }).ping()).toBe('berth-sandboxd 1');
    // A server at another path that records whatever reaches it.
    let reached = 0;
    const trap = createServer((socket) => {
      reached += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => trap.listen(join(dir, 'trap.sock'), resolve));
    try {
      symlinkSync(join(dir, 'trap.sock'), join(dir, 'link.sock'));
      // Unpinned: a symlink is not a socket, whatever it points at.
      await expect(new AgentClient(join(dir, 'link.sock')).ping()).rejects.toThrow(`sandbox agent at ${join(dir, 'link.sock')}: its socket is a symlink`);
      // Pinned: another socket, or a symlink to the pinned one, is refused before connecting.
      symlinkSync(join(dir, 'agent.sock'), join(dir, 'link-to-agent.sock'));
      for (const path of ['trap.sock', 'link.sock', 'link-to-agent.sock']) {
        await expect(new AgentClient(join(dir, path), { pin }).spawn({ argv: ['true'], env: {} })).rejects.toBeInstanceOf(AgentSocketReplacedError);
      }
      expect(reached).toBe(0);
    } finally {
      await new Promise((resolve) => trap.close(resolve));
    }
  });

  it('fails with AgentError when no agent answers by the deadline', async () => {
    const clock = new ManualClock();
    const nobody = new AgentClient(join(dir, 'nobody.sock'), { clock });
    let outcome: unknown;
    const waiting = nobody.waitReady(60_000).then(
      () => (outcome = 'ready'),
      (error: unknown) => (outcome = error),
    );
    // It keeps trying until the deadline, and gives up at it.
    await clock.advance(59_999);
    expect(outcome).toBeUndefined();
    await clock.advance(1);
    await waiting;
    expect(outcome).toBeInstanceOf(AgentError);
    expect((outcome as AgentError).message).toMatch(/did not answer within 60000 ms/);
    await expect(nobody.readFile('/etc/hostname')).rejects.toThrow(AgentError);
  });
});
