import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { spawnTestChild, until, type TestChild } from '@berth/testing';
import { ProxyCa, proxyEnvironment } from './proxy-ca.js';
import type { SidecarConfigFile } from './sidecar.js';

const SIDECAR = new URL('../../dist/proxy/sidecar.js', import.meta.url).pathname;
const SECRET = 'Bearer sidecar-secret-7777';
// Not 127.0.0.1: the sandbox's NO_PROXY sends loopback past the proxy, and this must go through it.
const UPSTREAM_HOST = '127.0.0.2';

function echo(req: http.IncomingMessage, res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ url: req.url, headers: req.headers }));
}

let dir: string;
let httpServer: http.Server;
let httpsServer: https.Server;
let sidecar: TestChild;
let env: Record<string, string>;
let httpPort: number;
let httpsPort: number;

async function listen(server: http.Server): Promise<number> {
  server.listen(0, UPSTREAM_HOST);
  await once(server, 'listening');
  return (server.address() as net.AddressInfo).port;
}

beforeAll(async () => {
  if (!existsSync(SIDECAR)) throw new Error(`${SIDECAR} is missing: build first (npx turbo run build)`);
  dir = await mkdtemp(join(tmpdir(), 'berth-sidecar-'));
  const [berthCa, upstreamCa] = await Promise.all([ProxyCa.generate(), ProxyCa.generate()]);
  const leaf = await upstreamCa.leafFor(UPSTREAM_HOST);
  httpServer = http.createServer(echo);
  httpsServer = https.createServer({ cert: leaf.certPem, key: leaf.keyPem }, echo);
  httpPort = await listen(httpServer);
  httpsPort = await listen(httpsServer);

  const config: SidecarConfigFile = {
    listen: '127.0.0.1:0',
    policy: {
      rules: [{ name: 'echo', matchHosts: [UPSTREAM_HOST], headers: [{ name: 'Authorization', value: SECRET }] }],
      allowList: [],
      denyList: [],
      privateAllow: [`${UPSTREAM_HOST}/32`],
    },
    caCertPath: join(dir, 'ca.crt'),
    caKeyPath: join(dir, 'ca.key'),
    logLevel: 'debug',
  };
  await writeFile(config.caCertPath, berthCa.certPem);
  await writeFile(config.caKeyPath, berthCa.keyPem);
  await writeFile(join(dir, 'config.json'), JSON.stringify(config));
  // The proxy verifies upstreams against Node's roots plus NODE_EXTRA_CA_CERTS (an operator's own CA).
  await writeFile(join(dir, 'upstream-ca.crt'), upstreamCa.certPem);
  // The sandbox's combined bundle: its image's CAs (here: the upstream's) plus the proxy CA.
  await writeFile(join(dir, 'bundle.crt'), `${upstreamCa.certPem}${berthCa.certPem}`);

  sidecar = spawnTestChild(process.execPath, [SIDECAR, '--config', join(dir, 'config.json')], {
    env: { PATH: process.env.PATH, NODE_EXTRA_CA_CERTS: join(dir, 'upstream-ca.crt') },
  });
  const port = Number((await sidecar.waitForOutput(/"port":(\d+),"rules".*"msg":"sandbox proxy listening"/, { timeoutMs: 15_000 }))[1]);
  env = { PATH: process.env.PATH!, ...proxyEnvironment({ port, caPath: config.caCertPath, bundlePath: join(dir, 'bundle.crt') }) };
}, 20_000);

afterAll(async () => {
  await sidecar?.stop();
  httpServer?.close();
  httpsServer?.close();
  await rm(dir, { recursive: true, force: true });
});

const run = promisify(execFile);

/** curl as a program in the sandbox runs it: only the proxy environment tells it where to go. */
async function curl(url: string): Promise<{ status: number; body: string }> {
  const { stdout } = await run('curl', ['-sS', '-w', '\n%{http_code}', url], { env });
  const cut = stdout.lastIndexOf('\n');
  return { status: Number(stdout.slice(cut + 1)), body: stdout.slice(0, cut) };
}

describe('the sandbox proxy sidecar (node dist/proxy/sidecar.js --config …)', () => {
  it('serves on TCP what its config file says, to a client that has only the proxy environment', async () => {
    const plain = await curl(`http://${UPSTREAM_HOST}:${httpPort}/plain`);
    expect(plain.status).toBe(200);
    expect(JSON.parse(plain.body)).toMatchObject({ url: '/plain', headers: { authorization: SECRET } });

    const secure = await curl(`https://${UPSTREAM_HOST}:${httpsPort}/secure`);
    expect(secure.status).toBe(200);
    expect(JSON.parse(secure.body)).toMatchObject({ url: '/secure', headers: { authorization: SECRET } });

    const refused = await curl('http://10.0.0.1/');
    expect(refused).toEqual({ status: 403, body: 'egress to 10.0.0.1 refused: private address\n' });
    // The sidecar's log line can reach its stdout pipe after the response reached curl.
    await until('the refusal in the sidecar log', () => (sidecar.output().includes('sandbox egress refused') ? true : undefined), 5000).catch(() => undefined);
    expect(sidecar.output()).toContain('sandbox egress refused');
    expect(sidecar.output()).not.toContain(SECRET);
  });

  it('stops on SIGTERM', async () => {
    expect(await sidecar.stop()).toBe(0);
    expect(sidecar.output()).toContain('"signal":"SIGTERM"');
  });

  it('refuses a config file that is not in its format, naming what is wrong and no values', async () => {
    const bad = join(dir, 'bad.json');
    await writeFile(
      bad,
      JSON.stringify({ listen: 'nowhere', policy: { rules: [{ name: 'x', matchHosts: [], headers: [{ name: 'a', value: SECRET, extra: 1 }] }] } }),
    );
    const result = await run(process.execPath, [SIDECAR, '--config', bad]).catch((error: { code: number; stderr: string }) => error);
    expect(result).toMatchObject({
      code: 2,
      stderr: expect.stringContaining(`the proxy config ${bad} is not valid: listen: listen is host:port, e.g. 127.0.0.1:3128`),
    });
    expect((result as { stderr: string }).stderr).toContain('policy.allowList');
    expect((result as { stderr: string }).stderr).not.toContain(SECRET);
  });
});
