/**
 * The auth proxy end to end on the container driver: a sandbox's outbound HTTP goes through its
 * proxy, which adds the rule's opaque header (the echo server on the host sees it) while nothing
 * inside the sandbox shows the secret; private addresses outside `privateEgress` are refused
 * with 403. Then the manager restarts on the same database: the running sandbox keeps its
 * commands and its proxy, and the proxy CA it trusts stays the same.
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Sandbox, SandboxClient } from 'langsmith/sandbox';
import { images, SandboxPlatform } from './__tests__/sandbox-platform.js';

const SECRET = 'sk-berth-e2e-9f3c1d7a5b';
/** `NO_PROXY` names 127.0.0.1 (the sandbox's own loopback); these requests mean the host's, through the proxy. */
const VIA_PROXY = { no_proxy: '', NO_PROXY: '' };

let platform: SandboxPlatform;
let client: SandboxClient;
let echo: Server;
let echoPort: number;
const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
let box: Sandbox;

const proxyConfig = () => ({
  rules: [{ name: 'echo', match_hosts: ['127.0.0.1'], headers: [{ name: 'X-Api-Secret', type: 'opaque', value: SECRET }] }],
});

beforeAll(async () => {
  echo = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    res.end(`echo ${req.url}\n`);
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  echoPort = (echo.address() as AddressInfo).port;
  platform = await SandboxPlatform.start({ db: 'gw_sbx_egress', sandboxes: { privateEgress: ['127.0.0.1/32'] } });
  client = platform.client();
  const snapshot = await client.createSnapshot('busybox', images.image, 1 << 30, { timeout: 60 });
  box = await client.createSandbox(snapshot.id, { name: 'egress', proxyConfig: proxyConfig(), timeout: 60 });
}, 120_000);
afterAll(async () => {
  await platform?.close();
  await new Promise((resolve) => echo?.close(resolve));
});

const fetchFromBox = (sandbox: Sandbox, url: string) => sandbox.run(`wget -q -O - ${url} 2>&1`, { env: VIA_PROXY });

describe('the auth proxy', () => {
  it('adds the rule’s opaque header to a request the sandbox makes', async () => {
    const result = await fetchFromBox(box, `http://127.0.0.1:${echoPort}/hello`);
    expect(result).toMatchObject({ stdout: 'echo /hello\n', exit_code: 0 });
    expect(seen.at(-1)).toMatchObject({ url: '/hello', headers: { 'x-api-secret': SECRET } });
  });

  it('never shows the secret inside the sandbox: not in env, files or process arguments', async () => {
    const env = await box.run('env; cat /proc/1/environ | tr "\\0" "\\n"');
    expect(env.stdout).toContain('HTTP_PROXY=');
    expect(env.stdout).not.toContain(SECRET);
    const ps = await box.run('for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < $f; echo; done');
    expect(ps.stdout).not.toContain(SECRET);
    const files = await box.run(
      `for d in /*; do case $d in /proc|/sys|/dev) ;; *) grep -rl '${SECRET.slice(0, 12)}''${SECRET.slice(12)}' $d 2>/dev/null ;; esac; done; echo done`,
    );
    expect(files.stdout).toBe('done\n');
    // Nor does the API give it back.
    const view = await platform.call('/boxes/egress');
    expect(JSON.stringify(view.body)).not.toContain(SECRET);
    expect(view.body.proxy_config.rules[0].headers[0]).toEqual({ name: 'X-Api-Secret', type: 'opaque', is_set: true });
  });

  it('refuses a private address outside the allowed CIDRs with 403, without reaching it', async () => {
    const before = seen.length;
    for (const host of ['127.0.0.2', '10.0.0.1', '169.254.169.254']) {
      const result = await fetchFromBox(box, `http://${host}:${echoPort}/nope`);
      expect({ host, exit: result.exit_code, out: result.stdout }).toEqual({ host, exit: 1, out: expect.stringMatching(/403/) });
    }
    expect(seen.length).toBe(before);
  }, 30_000);

  it('applies the sandbox’s access_control: a denied host is refused, an allow list refuses all it does not name', async () => {
    const snapshot = (await client.listSnapshots()).find((s) => s.name === 'busybox')!;
    const denied = await client.createSandbox(snapshot.id, {
      name: 'denied',
      proxyConfig: { rules: [], access_control: { deny_list: ['127.0.0.1'] } },
      timeout: 60,
    });
    const allowed = await client.createSandbox(snapshot.id, {
      name: 'allowed',
      proxyConfig: { rules: [], access_control: { allow_list: ['127.0.0.1'] } },
      timeout: 60,
    });
    const other = await client.createSandbox(snapshot.id, {
      name: 'other',
      proxyConfig: { rules: [], access_control: { allow_list: ['127.0.0.2'] } },
      timeout: 60,
    });
    try {
      const before = seen.length;
      // 127.0.0.1 is within the platform's privateEgress: only the sandbox's own lists refuse it.
      expect(await fetchFromBox(denied, `http://127.0.0.1:${echoPort}/denied`)).toMatchObject({ exit_code: 1, stdout: expect.stringMatching(/403/) });
      expect(await fetchFromBox(other, `http://127.0.0.1:${echoPort}/not-listed`)).toMatchObject({ exit_code: 1, stdout: expect.stringMatching(/403/) });
      expect(seen.length).toBe(before);
      expect(await fetchFromBox(allowed, `http://127.0.0.1:${echoPort}/allowed`)).toMatchObject({ exit_code: 0, stdout: 'echo /allowed\n' });
    } finally {
      for (const name of ['denied', 'allowed', 'other']) await client.deleteSandbox(name);
    }
  }, 120_000);

  it('refuses everything private on a sandbox whose platform allows no private egress', async () => {
    const strict = await SandboxPlatform.start({ db: 'gw_sbx_egress_strict' });
    try {
      const strictClient = strict.client();
      const snapshot = await strictClient.createSnapshot('busybox', images.image, 1 << 30, { timeout: 60 });
      const sandbox = await strictClient.createSandbox(snapshot.id, { name: 'strict', proxyConfig: proxyConfig(), timeout: 60 });
      const before = seen.length;
      const result = await fetchFromBox(sandbox, `http://127.0.0.1:${echoPort}/private`);
      expect(result).toMatchObject({ exit_code: 1, stdout: expect.stringMatching(/403/) });
      expect(seen.length).toBe(before);
    } finally {
      await strict.close();
    }
  }, 120_000);
});

describe('a manager restart', () => {
  it('keeps a running sandbox’s commands, its auth proxy and the CA it trusts', async () => {
    const ca = (await box.run('cat "$NODE_EXTRA_CA_CERTS"')).stdout;
    expect(ca).toContain('BEGIN CERTIFICATE');
    await box.write('/root/before-restart.txt', 'kept');
    await platform.restartManager();
    expect(await box.run('cat /root/before-restart.txt')).toMatchObject({ stdout: 'kept', exit_code: 0 });
    const result = await fetchFromBox(box, `http://127.0.0.1:${echoPort}/after-restart`);
    expect(result).toMatchObject({ stdout: 'echo /after-restart\n', exit_code: 0 });
    expect(seen.at(-1)).toMatchObject({ url: '/after-restart', headers: { 'x-api-secret': SECRET } });
    // A sandbox created by the new manager trusts the same CA.
    const fresh = await client.createSandbox(box.snapshot_id, { name: 'after-restart', timeout: 60 });
    expect((await fresh.run('cat "$NODE_EXTRA_CA_CERTS"')).stdout).toBe(ca);
  }, 120_000);
});
