/**
 * Which platform a command reaches from a folder of the user's own (an installed `berth`): the one
 * `make up` started in the checkout the CLI runs from, unless the folder or the flags say otherwise.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { down } from './commands/down.js';
import { status } from './commands/status.js';
import { gatewayClient } from './connection.js';
import { loadCliEnv } from './env.js';
import { StateDir } from './state.js';

let temp: string;
let checkout: string;
let project: string;
const checkoutPlatform = { gateway_url: 'http://127.0.0.1:18080', tenant_id: 't-checkout', api_key: 'brt_key_checkout' };

beforeAll(async () => {
  temp = await mkdtemp(join(tmpdir(), 'berth-connection-test-'));
  checkout = join(temp, 'berth');
  project = join(temp, 'my-agent');
  await mkdir(join(checkout, '.berth'), { recursive: true });
  await mkdir(project);
  await new StateDir(join(checkout, '.berth')).writeCredentials(checkoutPlatform);
});
afterAll(async () => {
  await rm(temp, { recursive: true, force: true });
});

const home = () => ({ HOME: temp, XDG_CONFIG_HOME: join(temp, 'config') });

describe('the platform of the checkout', () => {
  it('is what a command in another folder reaches, with its key', async () => {
    const client = await gatewayClient(loadCliEnv(home(), project, checkout), {});
    expect(client).toMatchObject({ url: checkoutPlatform.gateway_url, credential: 'api_key', tenantId: 't-checkout' });
  });

  it('gives way to the platform of the folder itself, and to --url (its key stays with its own gateway)', async () => {
    const here = join(temp, 'with-own');
    await mkdir(join(here, '.berth'), { recursive: true });
    await new StateDir(join(here, '.berth')).writeCredentials({ gateway_url: 'http://127.0.0.1:19090', tenant_id: 't-own', api_key: 'brt_key_own' });
    expect(await gatewayClient(loadCliEnv(home(), here, checkout), {})).toMatchObject({ url: 'http://127.0.0.1:19090', tenantId: 't-own' });
    await expect(gatewayClient(loadCliEnv(home(), project, checkout), { url: 'http://127.0.0.1:1' })).rejects.toThrow(
      /no credentials for http:\/\/127\.0\.0\.1:1/,
    );
  });

  it('is not used when BERTH_STATE_DIR names the state folder', async () => {
    await expect(gatewayClient(loadCliEnv({ ...home(), BERTH_STATE_DIR: join(temp, 'elsewhere') }, project, checkout), {})).rejects.toThrow(/no credentials/);
  });
});

describe('berth status', () => {
  it('in a folder of the user’s own reports the platform of the checkout, the one deploy commands reach', async () => {
    // The checkout's platform: a gateway answering /readyz with its instance id, recorded as `berth up` does.
    const gateway = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'ok', instance_id: 'i-checkout', checks: { postgres: { status: 'ok' } } }));
    }).listen(0, '127.0.0.1');
    await once(gateway, 'listening');
    const url = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}`;
    const checkoutState = new StateDir(join(checkout, '.berth'));
    try {
      await checkoutState.writeCredentials({ ...checkoutPlatform, gateway_url: url });
      await checkoutState.writePlatform({ pid: process.pid, port: 0, url, instance_id: 'i-checkout', started_at: '2026-01-02T03:04:05.000Z' });
      const env = loadCliEnv(home(), project, checkout);
      const lines: string[] = [];
      expect(await status(env, {}, (line) => lines.push(line))).toBe(true);
      expect(lines).toEqual([`Berth is running at ${url} (pid ${process.pid}, since 2026-01-02T03:04:05.000Z)`, `  postgres         ok`]);
      expect((await gatewayClient(env, {})).url).toBe(url);
      // BERTH_HOST_URL names the gateway, for deploy commands and status alike.
      const named: string[] = [];
      expect(await status(loadCliEnv({ ...home(), BERTH_HOST_URL: url }, project, temp), {}, (line) => named.push(line))).toBe(true);
      expect(named[0]).toBe(`Berth at ${url}`);
    } finally {
      await checkoutState.clearPlatform();
      await checkoutState.writeCredentials(checkoutPlatform);
      gateway.closeAllConnections();
      gateway.close();
    }
  });
});

describe('berth down', () => {
  it('in a folder of the user’s own stops the platform of the checkout', async () => {
    // A platform process (`serve` in its command line) recorded as `berth up` records it, its supervisor gone.
    const platform = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)', 'serve'], { stdio: 'ignore' });
    const exited = once(platform, 'exit');
    const checkoutState = new StateDir(join(checkout, '.berth'));
    try {
      await checkoutState.writePlatform({
        pid: platform.pid!,
        port: 0,
        url: checkoutPlatform.gateway_url,
        instance_id: 'i-down',
        started_at: '2026-01-02T03:04:05.000Z',
      });
      const lines: string[] = [];
      await down(loadCliEnv(home(), project, checkout), (line) => lines.push(line));
      expect(lines).toEqual([`stopped the platform (pid ${platform.pid}), which ran without its supervisor`]);
      expect(await exited).toEqual([null, 'SIGTERM']);
      expect(await checkoutState.readPlatform()).toBeUndefined();
    } finally {
      platform.kill('SIGKILL');
      await checkoutState.clearPlatform();
    }
  });
});
