import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { captureLogger, type CapturedLogs } from '@berth/testing';
import type { EgressPolicy } from '../drivers/driver.js';
import { ProxyCa } from './proxy-ca.js';
import { ProxyHost } from './proxy-host.js';
import { SandboxProxy } from './sandbox-proxy.js';

const SECRET = 'Bearer sk-the-secret-never-shown-4242';

interface Echo {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Answers every request with what it received, as JSON. */
function echo(req: http.IncomingMessage, res: http.ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    const body: Echo = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString() };
    res.writeHead(200, { 'content-type': 'application/json', connection: 'keep-alive, x-hop', 'x-hop': 'for the proxy only' });
    res.end(JSON.stringify(body));
  });
}

/** Accepts any upgrade, reports the Authorization it got in a header, then echoes bytes back. */
function echoUpgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\nX-Got-Auth: ${req.headers.authorization ?? 'none'}\r\n\r\n`,
  );
  if (head.length > 0) socket.write(head);
  socket.pipe(socket);
}

function policy(overrides: Partial<EgressPolicy> = {}): EgressPolicy {
  return { rules: [], allowList: [], denyList: [], privateAllow: ['127.0.0.1/32'], ...overrides };
}

function authRule(matchHosts: string[], name = 'auth', header = 'authorization', value = SECRET): EgressPolicy['rules'][number] {
  return { name, matchHosts, headers: [{ name: header, value }] };
}

let dir: string;
let berthCa: ProxyCa;
let upstreamCa: ProxyCa;
let httpPort: number;
let httpsPort: number;
let httpServer: http.Server;
let httpsServer: https.Server;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'berth-proxy-'));
  [berthCa, upstreamCa] = await Promise.all([ProxyCa.generate(), ProxyCa.generate()]);
  const leaf = await upstreamCa.leafFor('127.0.0.1');
  httpServer = http.createServer(echo).listen(0, '127.0.0.1');
  httpsServer = https.createServer({ cert: leaf.certPem, key: leaf.keyPem }, echo).listen(0, '127.0.0.1');
  httpServer.on('upgrade', echoUpgrade);
  httpsServer.on('upgrade', echoUpgrade);
  await Promise.all([once(httpServer, 'listening'), once(httpsServer, 'listening')]);
  httpPort = (httpServer.address() as net.AddressInfo).port;
  httpsPort = (httpsServer.address() as net.AddressInfo).port;
});

afterAll(async () => {
  httpServer.closeAllConnections();
  httpsServer.closeAllConnections();
  await Promise.all([new Promise((r) => httpServer.close(r)), new Promise((r) => httpsServer.close(r))]);
  await rm(dir, { recursive: true, force: true });
});

let proxy: SandboxProxy | undefined;
let logs: CapturedLogs;
let socketPath: string;
let counter = 0;

async function startProxy(p: EgressPolicy): Promise<SandboxProxy> {
  logs = captureLogger('sandbox-proxy');
  socketPath = join(dir, `proxy-${++counter}.sock`);
  proxy = new SandboxProxy({ listen: { path: socketPath }, policy: p, ca: berthCa, logger: logs.logger, upstreamCa: [upstreamCa.certPem] });
  await proxy.listen();
  return proxy;
}

afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function collect(res: http.IncomingMessage): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    res.on('error', reject);
  });
}

/** A plain-HTTP request through the proxy's Unix socket, in absolute-URI form (as HTTP_PROXY clients send). */
function viaProxy(url: string, options: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string; agent?: http.Agent } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { socketPath, path: url, method: options.method ?? 'GET', headers: options.headers, agent: options.agent ?? false },
      (res) => void collect(res).then(resolve, reject),
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Sends CONNECT through the proxy's socket; the socket (tunnel open) on 200, else the answer. */
async function connect(authority: string): Promise<{ socket: net.Socket } | Answer> {
  const socket = net.connect({ path: socketPath });
  await once(socket, 'connect');
  socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  let received = Buffer.alloc(0);
  for (;;) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    received = Buffer.concat([received, chunk]);
    const end = received.indexOf('\r\n\r\n');
    if (end < 0) continue;
    const head = received.subarray(0, end).toString();
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)![1]);
    if (status === 200) return { socket };
    let body = received.subarray(end + 4).toString();
    socket.on('data', (c: Buffer) => (body += c.toString()));
    await once(socket, 'close');
    return { status, headers: {}, body };
  }
}

/** An HTTPS request through a CONNECT tunnel, trusting only `ca`; also returns the certificate's issuer. */
async function httpsViaProxy(host: string, port: number, ca: string, headers: http.OutgoingHttpHeaders = {}): Promise<Answer & { issuerFingerprint?: string }> {
  const tunnel = await connect(`${host}:${port}`);
  if (!('socket' in tunnel)) return tunnel;
  const tlsSocket = tls.connect({ socket: tunnel.socket, host, ca: [ca], ...(net.isIP(host) ? {} : { servername: host }) });
  await once(tlsSocket, 'secureConnect');
  const peer = tlsSocket.getPeerCertificate(true);
  const answer = await new Promise<Answer>((resolve, reject) => {
    // No agent: the request goes over the tunnel's TLS socket.
    const req = https.request(
      { host, port, path: '/inside?x=1', headers, createConnection: () => tlsSocket },
      (res) => void collect(res).then(resolve, reject),
    );
    req.on('error', reject);
    req.end();
  });
  tlsSocket.destroy();
  return { ...answer, issuerFingerprint: peer.issuerCertificate?.fingerprint256 };
}

const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

function logText(): string {
  return JSON.stringify(logs.lines());
}

describe('SandboxProxy over a Unix socket', () => {
  it('forwards plain HTTP with the injected header, without hop-by-hop or Proxy-* headers, body both ways', async () => {
    await startProxy(policy({ rules: [authRule(['127.0.0.1'])] }));
    const answer = await viaProxy(`http://127.0.0.1:${httpPort}/path?q=1`, {
      method: 'POST',
      headers: {
        'proxy-authorization': 'Basic eA==',
        'x-keep': 'yes',
        authorization: 'from the sandbox',
        'content-type': 'text/plain',
        connection: 'keep-alive, x-drop',
        'x-drop': '1',
      },
      body: 'hello upstream',
    });
    expect(answer.status).toBe(200);
    expect(answer.headers['x-hop']).toBeUndefined();
    const seen = JSON.parse(answer.body) as Echo;
    expect(seen).toMatchObject({ method: 'POST', url: '/path?q=1', body: 'hello upstream' });
    expect(seen.headers).toMatchObject({ authorization: SECRET, 'x-keep': 'yes', host: `127.0.0.1:${httpPort}` });
    expect(seen.headers['proxy-authorization']).toBeUndefined();
    expect(seen.headers['x-drop']).toBeUndefined();
    expect(logText()).not.toContain(SECRET);
  });

  it('keeps the sandbox connection alive across requests', async () => {
    await startProxy(policy({ rules: [authRule(['127.0.0.1'])] }));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<net.Socket>();
    try {
      for (let i = 0; i < 3; i++) {
        const answer = await new Promise<Answer>((resolve, reject) => {
          const req = http.get({ socketPath, path: `http://127.0.0.1:${httpPort}/${i}`, agent }, (res) => void collect(res).then(resolve, reject));
          req.on('socket', (socket) => sockets.add(socket));
          req.on('error', reject);
        });
        expect(answer.status).toBe(200);
      }
      expect(sockets.size).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it('intercepts HTTPS to a host with a rule: the sandbox trusts only the Berth CA, the upstream gets the header', async () => {
    await startProxy(policy({ rules: [authRule(['127.0.0.1'])] }));
    const answer = await httpsViaProxy('127.0.0.1', httpsPort, berthCa.certPem, { authorization: 'overridden' });
    expect(answer.status).toBe(200);
    expect(answer.issuerFingerprint).toBe(fingerprint(berthCa.certPem));
    const seen = JSON.parse(answer.body) as Echo;
    expect(seen.url).toBe('/inside?x=1');
    expect(seen.headers.authorization).toBe(SECRET);
    expect(logText()).not.toContain(SECRET);
  });

  it('tunnels HTTPS to a host without a rule untouched: the sandbox sees the upstream certificate', async () => {
    await startProxy(policy({ rules: [authRule(['api.example.com'])] }));
    const answer = await httpsViaProxy('127.0.0.1', httpsPort, upstreamCa.certPem, { 'x-own': 'mine' });
    expect(answer.status).toBe(200);
    expect(answer.issuerFingerprint).toBe(fingerprint(upstreamCa.certPem));
    const seen = JSON.parse(answer.body) as Echo;
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers['x-own']).toBe('mine');
  });

  it('an intercepted upstream must still present a certificate the proxy trusts', async () => {
    logs = captureLogger('sandbox-proxy');
    socketPath = join(dir, `proxy-${++counter}.sock`);
    // No extra CA: the upstream's certificate is from a CA that Node does not know.
    proxy = new SandboxProxy({ listen: { path: socketPath }, policy: policy({ rules: [authRule(['127.0.0.1'])] }), ca: berthCa, logger: logs.logger });
    await proxy.listen();
    const answer = await httpsViaProxy('127.0.0.1', httpsPort, berthCa.certPem);
    expect(answer.status).toBe(502);
    expect(answer.body).toMatch(
      /^cannot reach 127\.0\.0\.1:\d+: (SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT_LOCALLY)/,
    );
    expect(answer.body).not.toContain(SECRET);
  });

  it('forwards WebSocket-style upgrades with the injected header, over plain HTTP and intercepted TLS', async () => {
    await startProxy(policy({ rules: [authRule(['127.0.0.1'])] }));
    async function roundTrip(req: http.ClientRequest): Promise<{ auth: string | string[] | undefined; echoed: string }> {
      req.end();
      const [res, socket] = (await once(req, 'upgrade')) as [http.IncomingMessage, Duplex];
      socket.write('ping');
      const [echoed] = (await once(socket, 'data')) as [Buffer];
      socket.destroy();
      return { auth: res.headers['x-got-auth'], echoed: echoed.toString() };
    }
    const upgrade = { connection: 'Upgrade', upgrade: 'echo' };
    expect(await roundTrip(http.request({ socketPath, path: `http://127.0.0.1:${httpPort}/ws`, headers: upgrade }))).toEqual({ auth: SECRET, echoed: 'ping' });

    const tunnel = await connect(`127.0.0.1:${httpsPort}`);
    if (!('socket' in tunnel)) throw new Error(`CONNECT failed: ${tunnel.body}`);
    const tlsSocket = tls.connect({ socket: tunnel.socket, host: '127.0.0.1', ca: [berthCa.certPem] });
    await once(tlsSocket, 'secureConnect');
    expect(await roundTrip(https.request({ host: '127.0.0.1', path: '/wss', headers: upgrade, createConnection: () => tlsSocket }))).toEqual({
      auth: SECRET,
      echoed: 'ping',
    });
  });

  it('refuses loopback, private and metadata addresses by default with 403 and the reason, never showing the secret', async () => {
    await startProxy(policy({ privateAllow: [], rules: [authRule(['*'])] }));
    for (const [url, reason] of [
      [`http://127.0.0.1:${httpPort}/`, `egress to 127.0.0.1 refused: loopback address`],
      ['http://10.0.0.1/', 'egress to 10.0.0.1 refused: private address'],
      ['http://169.254.169.254/latest/meta-data/', 'egress to 169.254.169.254 refused: cloud metadata address'],
      [`http://localhost:${httpPort}/`, `egress to localhost (127.0.0.1) refused: loopback address`],
    ] as const) {
      const answer = await viaProxy(url);
      expect(answer.status).toBe(403);
      expect(answer.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(answer.body).toBe(`${reason}\n`);
    }
    for (const [authority, reason] of [
      [`127.0.0.1:${httpsPort}`, 'egress to 127.0.0.1 refused: loopback address'],
      ['10.0.0.1:443', 'egress to 10.0.0.1 refused: private address'],
      ['169.254.169.254:443', 'egress to 169.254.169.254 refused: cloud metadata address'],
    ] as const) {
      const answer = await connect(authority);
      expect(answer).toEqual({ status: 403, headers: {}, body: `${reason}\n` });
    }
    const refusals = logs.lines().filter((line) => line.msg === 'sandbox egress refused');
    expect(refusals.map((line) => line.host)).toEqual(['127.0.0.1', '10.0.0.1', '169.254.169.254', 'localhost', '127.0.0.1', '10.0.0.1', '169.254.169.254']);
    expect(refusals[3]).toMatchObject({ address: '127.0.0.1', reason: 'loopback address', level: 30 + 10 });
    expect(logText()).not.toContain(SECRET);
  });

  it('applies deny lists, allow lists, globs, CIDRs and regexes to both HTTP and CONNECT', async () => {
    await startProxy(policy({ denyList: ['127.0.0.0/30'] }));
    expect((await viaProxy(`http://127.0.0.1:${httpPort}/`)).body).toBe('egress to 127.0.0.1 refused: on the deny list\n');
    proxy!.update(policy({ denyList: ['~local.*'] }));
    expect((await viaProxy(`http://localhost:${httpPort}/`)).body).toBe('egress to localhost refused: on the deny list\n');
    expect((await viaProxy(`http://127.0.0.1:${httpPort}/`)).status).toBe(200);
    proxy!.update(policy({ allowList: ['*.example.com'] }));
    expect(await connect(`127.0.0.1:${httpsPort}`)).toMatchObject({ status: 403, body: 'egress to 127.0.0.1 refused: not on the allow list\n' });
    proxy!.update(policy({ allowList: ['127.0.0.0/8'] }));
    expect('socket' in (await connect(`127.0.0.1:${httpsPort}`))).toBe(true);
    proxy!.update(policy({ allowList: ['localhost'] }));
    expect((await viaProxy(`http://localhost:${httpPort}/x`)).status).toBe(200);
  });

  it('the first matching rule wins, and update() changes rules for the next request', async () => {
    await startProxy(
      policy({
        rules: [authRule(['*.example.com']), authRule(['127.0.0.*'], 'first', 'x-first', 'one'), authRule(['127.0.0.1'], 'second', 'x-second', 'two')],
      }),
    );
    const first = JSON.parse((await viaProxy(`http://127.0.0.1:${httpPort}/`)).body) as Echo;
    expect(first.headers['x-first']).toBe('one');
    expect(first.headers['x-second']).toBeUndefined();
    expect(first.headers.authorization).toBeUndefined();

    proxy!.update(policy({ rules: [authRule(['127.0.0.1'], 'second', 'x-second', 'two')] }));
    const second = JSON.parse((await viaProxy(`http://127.0.0.1:${httpPort}/`)).body) as Echo;
    expect(second.headers['x-first']).toBeUndefined();
    expect(second.headers['x-second']).toBe('two');

    proxy!.update(policy({ privateAllow: [] }));
    expect((await viaProxy(`http://127.0.0.1:${httpPort}/`)).status).toBe(403);
  });

  it('answers requests that are not for a proxy with 400, and unreachable upstreams with 502', async () => {
    await startProxy(policy());
    expect(await viaProxy('/not-absolute')).toMatchObject({ status: 400, body: expect.stringContaining('send absolute-URI requests') });
    const closed = net.createServer().listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as net.AddressInfo).port;
    closed.close();
    expect(await viaProxy(`http://127.0.0.1:${port}/`)).toMatchObject({ status: 502, body: `cannot reach 127.0.0.1:${port}: ECONNREFUSED\n` });
    expect(await connect(`127.0.0.1:${port}`)).toMatchObject({ status: 502, body: `cannot reach 127.0.0.1:${port}: ECONNREFUSED\n` });
    expect(await connect('no-port')).toMatchObject({ status: 400 });
  });
});

describe('ProxyHost', () => {
  it('serves one proxy per instance on its socket, and closes it', async () => {
    const host = new ProxyHost({ ca: berthCa, logger: captureLogger().logger, upstreamCa: [upstreamCa.certPem] });
    socketPath = join(dir, `host-${++counter}.sock`);
    const open = await host.open('berth-sbx-abc123def456', socketPath, policy({ rules: [authRule(['127.0.0.1'])] }));
    try {
      const seen = JSON.parse((await viaProxy(`http://127.0.0.1:${httpPort}/`)).body) as Echo;
      expect(seen.headers.authorization).toBe(SECRET);
      // Opening the same instance again (a restart) replaces its proxy on the same socket.
      await host.open('berth-sbx-abc123def456', socketPath, policy({ rules: [authRule(['127.0.0.1'], 'x', 'x-again', 'yes')] }));
      expect((JSON.parse((await viaProxy(`http://127.0.0.1:${httpPort}/`)).body) as Echo).headers['x-again']).toBe('yes');
    } finally {
      await open.close();
      await host.close();
    }
    await expect(viaProxy(`http://127.0.0.1:${httpPort}/`)).rejects.toMatchObject({ code: expect.stringMatching(/ENOENT|ECONNREFUSED/) });
  });
});
