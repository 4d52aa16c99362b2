/**
 * `berth status`: is the embedded platform running, and is it ready?
 */
import type { CliEnv } from '../env.js';
import { StateDir, isAlive } from '../state.js';

export async function status(env: CliEnv, print: (line: string) => void): Promise<boolean> {
  const platform = await new StateDir(env.stateDir).readPlatform();
  if (!platform || !isAlive(platform.pid)) {
    print('Berth is not running (start it with `make up`)');
    return false;
  }
  let body: { status: string; checks: Record<string, { status: string; detail?: string }> } | undefined;
  try {
    body = (await (await fetch(`${platform.url}/readyz`, { signal: AbortSignal.timeout(5000) })).json()) as typeof body;
  } catch {
    body = undefined;
  }
  print(`Berth is running at ${platform.url} (pid ${platform.pid}, since ${platform.started_at})`);
  if (!body) {
    print('  readiness: no answer');
    return false;
  }
  for (const [name, check] of Object.entries(body.checks)) {
    print(`  ${name.padEnd(16)} ${check.status}${check.detail ? ` (${check.detail})` : ''}`);
  }
  return body.status === 'ok';
}
