import { afterEach, describe, expect, it } from '@jest/globals';
import { spawnTestChild, type TestChild } from './child-process.js';

const children: TestChild[] = [];
/** A node child running `script`, stopped after each test. */
function node(script: string): TestChild {
  const started = spawnTestChild(process.execPath, ['-e', script], { env: { PATH: process.env.PATH } });
  children.push(started);
  return started;
}
afterEach(async () => {
  await Promise.all(children.splice(0).map((c) => c.stop()));
});

describe('spawnTestChild', () => {
  it('resolves waitForOutput with the first match, printed before or after the call, and stops the child with its exit code', async () => {
    const child = node("console.log('starting'); setTimeout(() => console.log('ready 42'), 200); setInterval(() => {}, 1000);");
    const match = await child.waitForOutput(/ready (\d+)/);
    expect(match[1]).toBe('42');
    // Already printed: resolves at once, even for a global pattern.
    expect((await child.waitForOutput(/starting/g, { timeoutMs: 0 }))[0]).toBe('starting');
    expect(await child.stop()).toBeNull();
    expect(child.child.signalCode).toBe('SIGTERM');
  });

  it('rejects with what the child printed when it exits before printing the line', async () => {
    const child = node("console.error('config is missing'); process.exit(3);");
    await expect(child.waitForOutput(/ready/)).rejects.toThrow(/exited \(code 3, signal null\) before printing \/ready\/; it printed:\nconfig is missing/);
  });

  it('rejects with what the child printed when the timeout passes', async () => {
    const child = node("console.log('still starting'); setInterval(() => {}, 1000);");
    await child.waitForOutput(/still/);
    await expect(child.waitForOutput(/ready/, { timeoutMs: 300 })).rejects.toThrow(/did not print \/ready\/ within 300 ms; it printed:\nstill starting/);
    expect(child.child.exitCode).toBeNull();
  });

  it('rejects when the program cannot be started', async () => {
    const started = spawnTestChild('/no/such/program', [], { env: {} });
    children.push(started);
    await expect(started.waitForOutput(/ready/)).rejects.toThrow(/could not be started \(spawn \/no\/such\/program ENOENT\)/);
  });

  it('has the output to its end once stop() resolved, and the exit code of a child that handles SIGTERM', async () => {
    const child = node("process.on('SIGTERM', () => { console.log('bye'); process.exit(0); }); console.log('up'); setInterval(() => {}, 1000);");
    await child.waitForOutput(/up/);
    expect(await child.stop()).toBe(0);
    expect(child.output()).toBe('up\nbye\n');
  });
});
