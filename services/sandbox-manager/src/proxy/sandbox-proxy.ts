/**
 * A sandbox's auth proxy: an HTTP/1.1 forward proxy that is the sandbox's only way out.
 *
 * - `GET http://host/path` (absolute URI): checked by the egress policy, then forwarded with the
 *   headers of the first rule whose host glob matches, hop-by-hop and `Proxy-*` headers removed.
 * - `CONNECT host:443`: checked; when a rule matches the host the proxy answers the TLS itself with a
 *   leaf certificate from the Berth proxy CA (which the sandbox trusts), reads the requests inside,
 *   adds the headers and sends them on over TLS to the real host (whose certificate is verified as
 *   any client would). Any other host gets a plain byte tunnel: the sandbox sees that host's own
 *   certificate and the proxy sees nothing.
 *
 * The injected header values are plaintext only in this process's memory: they are never logged,
 * never put in a response, and never reach the sandbox (they are added on the way out).
 */
import { lstat, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { Duplex, Readable } from 'node:stream';
import tls from 'node:tls';
import type { Logger } from '@berth/log';
import type { EgressPolicy, InjectedHeader } from '../drivers/driver.js';
import { EgressDeniedError, EgressGuard, EgressPolicyError, hostGlob, normalizeHost, type CheckedAddress } from './egress-policy.js';
import type { PemPair, ProxyCa } from './proxy-ca.js';

export interface SandboxProxyOptions {
  /** A Unix socket path (the container adapter) or a TCP address (the Kubernetes sidecar). */
  listen: { path: string } | { host: string; port: number };
  policy: EgressPolicy;
  /** Signs the certificates of hosts that header rules intercept; only a policy with rules needs it. */
  ca?: ProxyCa;
  logger: Logger;
  /** Extra CAs trusted for upstream TLS besides Node's own roots (tests' local servers). */
  upstreamCa?: string[];
  /** @default 10000 */
  connectTimeoutMs?: number;
}

interface CompiledRule {
  name: string;
  matches: ((host: string) => boolean)[];
  headers: InjectedHeader[];
}

/** Where the requests read from an intercepted CONNECT go. */
interface InterceptTarget {
  host: string;
  port: number;
}

/** Where one request goes. */
interface Destination extends InterceptTarget {
  secure: boolean;
  /** Origin-form: `/path?query`. */
  path: string;
}

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1); never forwarded. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'proxy-connection']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/i;
const CONNECT_OK = 'HTTP/1.1 200 Connection Established\r\n\r\n';
const NOT_A_PROXY_REQUEST = 'this is the sandbox egress proxy: send absolute-URI requests (GET http://host/path) or CONNECT host:port';

function compileRules(policy: EgressPolicy): CompiledRule[] {
  return policy.rules.map((rule) => {
    for (const header of rule.headers) {
      // The value is never quoted here: these messages reach logs and API errors.
      if (!TOKEN.test(header.name)) throw new EgressPolicyError(`rule ${JSON.stringify(rule.name)}: ${JSON.stringify(header.name)} is not a header name`);
      if (/[\r\n\0]/.test(header.value))
        throw new EgressPolicyError(`rule ${JSON.stringify(rule.name)}: the value of header ${header.name} has a line break or NUL`);
    }
    return { name: rule.name, matches: rule.matchHosts.map(hostGlob), headers: rule.headers };
  });
}

/** `host:port` of a CONNECT (`[::1]:443` for IPv6); undefined when it is not one. */
function parseAuthority(authority: string): InterceptTarget | undefined {
  const match = /^(\[[0-9a-f:.]+\]|[^:[\]/\s]+):(\d{1,5})$/i.exec(authority);
  if (!match) return undefined;
  return { host: normalizeHost(match[1]!), port: Number(match[2]) };
}

/** A lookup that answers with addresses already checked, so the connection cannot go elsewhere. */
function checkedLookup(addresses: CheckedAddress[]): net.LookupFunction {
  return (_hostname, options, callback) => {
    if (options.all) return (callback as unknown as (e: null, a: CheckedAddress[]) => void)(null, addresses);
    const family = options.family === 6 || options.family === 4 ? options.family : undefined;
    const first = addresses.find((a) => family === undefined || a.family === family) ?? addresses[0]!;
    callback(null, first.address, first.family);
  };
}

function plainText(res: http.ServerResponse, status: number, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': Buffer.byteLength(`${message}\n`) });
  res.end(`${message}\n`);
}

function rawResponse(socket: Duplex, status: number, statusText: string, message: string): void {
  const body = `${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${statusText}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** What a failed upstream connection says to the sandbox (Node's messages never carry header values). */
function unreachable(host: string, port: number, error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  return `cannot reach ${host}:${port}: ${code ?? (error as Error).message}`;
}

export class SandboxProxy {
  private guard: EgressGuard;
  private rules: CompiledRule[];
  private readonly server: http.Server;
  /** Parses the requests decrypted from intercepted CONNECTs; it never listens itself. */
  private readonly inner: http.Server;
  private readonly targets = new WeakMap<object, InterceptTarget>();
  private readonly contexts = new WeakMap<PemPair, tls.SecureContext>();
  private readonly sockets = new Set<Duplex>();
  private httpAgent = new http.Agent({ keepAlive: true });
  private httpsAgent: https.Agent;
  private readonly connectTimeoutMs: number;
  private closed = false;

  /** EgressPolicyError when the policy does not compile. */
  constructor(private readonly options: SandboxProxyOptions) {
    this.guard = new EgressGuard(options.policy);
    this.rules = this.compileRules(options.policy);
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
    this.httpsAgent = this.newHttpsAgent();
    // Uploads through the proxy may take long: no whole-request deadline (headers still have one).
    this.server = http.createServer({ requestTimeout: 0 }, (req, res) => void this.forward(req, res));
    this.server.on('connect', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.connect(req, socket, head));
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head));
    this.server.on('connection', (socket: net.Socket) => this.track(socket));
    this.server.on('clientError', (error, socket) => {
      options.logger.debug({ err: error }, 'sandbox proxy: malformed request');
      if (socket.writable) rawResponse(socket, 400, 'Bad Request', 'malformed HTTP request');
      else socket.destroy();
    });
    this.inner = http.createServer({ requestTimeout: 0 }, (req, res) => void this.forward(req, res, this.targets.get(req.socket)));
    this.inner.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head, this.targets.get(socket)));
    this.inner.on('clientError', (_error, socket) => socket.destroy());
  }

  /** Starts listening; resolves with the TCP port (0 for a Unix socket). */
  async listen(): Promise<number> {
    const { listen } = this.options;
    if ('path' in listen) {
      // A socket file left by a proxy that did not close (a crash) would make listen fail.
      const existing = await lstat(listen.path).catch(() => undefined);
      if (existing?.isSocket()) await rm(listen.path);
    }
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      const done = () => {
        this.server.off('error', reject);
        resolve();
      };
      if ('path' in listen) this.server.listen(listen.path, done);
      else this.server.listen(listen.port, listen.host, done);
    });
    const address = this.server.address();
    return typeof address === 'object' && address ? address.port : 0;
  }

  /** Replaces the rules and lists; requests from now on use them (open tunnels are not cut). */
  update(policy: EgressPolicy): void {
    const guard = new EgressGuard(policy);
    const rules = this.compileRules(policy);
    this.guard = guard;
    this.rules = rules;
    // Pooled upstream connections were checked under the old policy.
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
    this.httpAgent = new http.Agent({ keepAlive: true });
    this.httpsAgent = this.newHttpsAgent();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closing = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    this.server.closeAllConnections();
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
    await closing;
  }

  private compileRules(policy: EgressPolicy): CompiledRule[] {
    if (policy.rules.length > 0 && !this.options.ca) throw new EgressPolicyError('header rules need the proxy CA');
    return compileRules(policy);
  }

  private newHttpsAgent(): https.Agent {
    const extra = this.options.upstreamCa;
    return new https.Agent({ keepAlive: true, ...(extra?.length ? { ca: [...tls.rootCertificates, ...extra] } : {}) });
  }

  private track(socket: Duplex): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
  }

  private ruleFor(host: string): CompiledRule | undefined {
    return this.rules.find((rule) => rule.matches.some((match) => match(host)));
  }

  /** Checks and resolves a destination; on refusal, logs it and returns the reason for the sandbox. */
  private async check(host: string, port: number, method: string): Promise<{ addresses: CheckedAddress[] } | { status: number; message: string }> {
    try {
      return { addresses: await this.guard.resolve(host, port) };
    } catch (error) {
      if (error instanceof EgressDeniedError) {
        this.options.logger.warn({ host, port, address: error.address, reason: error.reason, method }, 'sandbox egress refused');
        return { status: 403, message: error.message };
      }
      const code = (error as NodeJS.ErrnoException).code;
      this.options.logger.info({ host, port, method, code }, 'sandbox egress: host does not resolve');
      return { status: 502, message: `cannot resolve ${host}: ${code ?? (error as Error).message}` };
    }
  }

  /** Where a request goes: the intercepted CONNECT's host, or the absolute URI's; undefined if neither. */
  private destination(req: http.IncomingMessage, intercepted?: InterceptTarget): Destination | undefined {
    if (intercepted) return { ...intercepted, secure: true, path: req.url ?? '/' };
    const url = URL.canParse(req.url ?? '') ? new URL(req.url!) : undefined;
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) return undefined;
    const secure = url.protocol === 'https:';
    return { host: normalizeHost(url.hostname), port: url.port ? Number(url.port) : secure ? 443 : 80, secure, path: `${url.pathname}${url.search}` };
  }

  /** The upstream request to a checked destination, with the rule's headers (and `extra` ones). */
  private upstreamRequest(req: http.IncomingMessage, to: Destination, addresses: CheckedAddress[], extra: Record<string, string> = {}): http.ClientRequest {
    const rule = this.ruleFor(to.host);
    const headers = { ...forwardedHeaders(req.rawHeaders, rule?.headers ?? []), ...extra };
    headers.host = to.port === (to.secure ? 443 : 80) ? hostHeader(to.host) : `${hostHeader(to.host)}:${to.port}`;
    this.options.logger.debug({ method: req.method, host: to.host, port: to.port, rule: rule?.name, secure: to.secure }, 'sandbox proxy request');
    const upstream = (to.secure ? https : http).request({
      host: to.host,
      port: to.port,
      method: req.method,
      path: to.path,
      headers,
      agent: to.secure ? this.httpsAgent : this.httpAgent,
      lookup: checkedLookup(addresses),
      setHost: false,
    });
    this.connectDeadline(upstream);
    return upstream;
  }

  /** One HTTP request: an absolute-URI one from the sandbox, or one read from an intercepted CONNECT. */
  private async forward(req: http.IncomingMessage, res: http.ServerResponse, intercepted?: InterceptTarget): Promise<void> {
    const to = this.destination(req, intercepted);
    if (!to) return plainText(res, 400, NOT_A_PROXY_REQUEST);
    const { host, port } = to;
    const checked = await this.check(host, port, req.method ?? 'GET');
    if ('status' in checked) return plainText(res, checked.status, checked.message);

    const upstream = this.upstreamRequest(req, to, checked.addresses);
    upstream.on('response', (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.statusMessage, filteredRaw(answer.rawHeaders));
      answer.pipe(res);
      answer.on('error', () => res.destroy());
    });
    upstream.on('error', (error) => {
      this.options.logger.info({ host, port, method: req.method, code: (error as NodeJS.ErrnoException).code }, 'sandbox proxy: upstream failed');
      plainText(res, 502, unreachable(host, port, error));
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  /** A protocol upgrade (WebSocket): checked and forwarded like a request, then bytes both ways. */
  private async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer, intercepted?: InterceptTarget): Promise<void> {
    this.track(socket);
    socket.on('error', () => socket.destroy());
    const to = this.destination(req, intercepted);
    if (!to) return rawResponse(socket, 400, 'Bad Request', NOT_A_PROXY_REQUEST);
    const checked = await this.check(to.host, to.port, req.method ?? 'GET');
    if ('status' in checked) return rawResponse(socket, checked.status, checked.status === 403 ? 'Forbidden' : 'Bad Gateway', checked.message);
    const upstream = this.upstreamRequest(req, to, checked.addresses, { connection: 'Upgrade', upgrade: req.headers.upgrade ?? '' });
    const relayHead = (answer: http.IncomingMessage) => {
      const lines = [`HTTP/1.1 ${answer.statusCode} ${answer.statusMessage}`];
      for (let i = 0; i + 1 < answer.rawHeaders.length; i += 2) lines.push(`${answer.rawHeaders[i]}: ${answer.rawHeaders[i + 1]}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
    };
    upstream.on('upgrade', (answer, upstreamSocket: net.Socket, upstreamHead: Buffer) => {
      this.track(upstreamSocket);
      relayHead(answer);
      if (upstreamHead.length > 0) socket.write(upstreamHead);
      if (head.length > 0) upstreamSocket.write(head);
      upstreamSocket.on('error', () => socket.destroy());
      upstreamSocket.on('close', () => socket.destroy());
      socket.on('close', () => upstreamSocket.destroy());
      socket.pipe(upstreamSocket).pipe(socket);
    });
    // The upstream declined the upgrade: relay its answer and close.
    upstream.on('response', (answer) => {
      relayHead(answer);
      answer.pipe(socket);
    });
    upstream.on('error', (error) => {
      this.options.logger.info({ host: to.host, port: to.port, code: (error as NodeJS.ErrnoException).code }, 'sandbox proxy: upstream upgrade failed');
      if (socket.writable) rawResponse(socket, 502, 'Bad Gateway', unreachable(to.host, to.port, error));
    });
    upstream.end();
  }

  /** Fails a request whose upstream does not accept the connection in time (and only then). */
  private connectDeadline(request: http.ClientRequest): void {
    request.on('socket', (socket) => {
      if (!socket.connecting) return;
      socket.setTimeout(this.connectTimeoutMs, () => request.destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' })));
      socket.once('connect', () => socket.setTimeout(0));
    });
  }

  private async connect(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    this.track(socket);
    socket.on('error', (error) => this.options.logger.debug({ err: error }, 'sandbox proxy: client connection failed'));
    const target = parseAuthority(req.url ?? '');
    if (!target) return rawResponse(socket, 400, 'Bad Request', `CONNECT needs host:port, not ${JSON.stringify(req.url)}`);
    const { host, port } = target;
    const checked = await this.check(host, port, 'CONNECT');
    if ('status' in checked) return rawResponse(socket, checked.status, checked.status === 403 ? 'Forbidden' : 'Bad Gateway', checked.message);

    const rule = this.ruleFor(host);
    if (rule) {
      let context: tls.SecureContext;
      try {
        context = await this.contextFor(host);
      } catch (error) {
        this.options.logger.error({ err: error, host }, 'sandbox proxy: cannot make a certificate');
        return rawResponse(socket, 502, 'Bad Gateway', `the proxy cannot make a certificate for ${host}`);
      }
      this.options.logger.debug({ host, port, rule: rule.name }, 'sandbox proxy: intercepting CONNECT');
      socket.write(CONNECT_OK);
      const tlsSocket = new tls.TLSSocket(withHead(socket, head), { isServer: true, secureContext: context, ALPNProtocols: ['http/1.1'] });
      tlsSocket.on('error', (error) => {
        this.options.logger.info(
          { host, code: (error as NodeJS.ErrnoException).code, err: error },
          'sandbox proxy: TLS from the sandbox failed (does it trust the Berth proxy CA?)',
        );
        socket.destroy();
      });
      this.targets.set(tlsSocket, target);
      this.inner.emit('connection', tlsSocket);
      return;
    }

    let upstream: net.Socket;
    try {
      upstream = await this.dial(checked.addresses, port);
    } catch (error) {
      this.options.logger.info({ host, port, code: (error as NodeJS.ErrnoException).code }, 'sandbox proxy: tunnel upstream failed');
      return rawResponse(socket, 502, 'Bad Gateway', unreachable(host, port, error));
    }
    if (socket.destroyed) return void upstream.destroy();
    this.track(upstream);
    this.options.logger.debug({ host, port }, 'sandbox proxy: tunnelling CONNECT');
    socket.write(CONNECT_OK);
    if (head.length > 0) upstream.write(head);
    upstream.on('error', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
    upstream.on('close', () => socket.destroy());
    socket.pipe(upstream).pipe(socket);
  }

  /** Connects to the first checked address that answers. */
  private async dial(addresses: CheckedAddress[], port: number): Promise<net.Socket> {
    let last: unknown;
    for (const { address } of addresses) {
      try {
        return await new Promise<net.Socket>((resolve, reject) => {
          const socket = net.connect({ host: address, port });
          socket.setTimeout(this.connectTimeoutMs, () => socket.destroy(Object.assign(new Error('connect timed out'), { code: 'ETIMEDOUT' })));
          socket.once('error', reject);
          socket.once('connect', () => {
            socket.setTimeout(0);
            socket.off('error', reject);
            resolve(socket);
          });
        });
      } catch (error) {
        last = error;
      }
    }
    throw last;
  }

  private async contextFor(host: string): Promise<tls.SecureContext> {
    const pair = await this.options.ca!.leafFor(host);
    let context = this.contexts.get(pair);
    if (!context) {
      context = tls.createSecureContext({ cert: pair.certPem, key: pair.keyPem });
      this.contexts.set(pair, context);
    }
    return context;
  }
}

/** The socket, with bytes the client sent right after its CONNECT (before our 200) read first. */
function withHead(socket: Duplex, head: Buffer): Duplex {
  if (head.length === 0) return socket;
  async function* bytes() {
    yield head;
    yield* socket;
  }
  return Duplex.from({ readable: Readable.from(bytes()), writable: socket });
}

function hostHeader(host: string): string {
  return net.isIPv6(host) ? `[${host}]` : host;
}

/** The request's headers minus hop-by-hop, `Proxy-*` and the ones a rule sets, plus the rule's. */
function forwardedHeaders(raw: string[], injected: InjectedHeader[]): Record<string, string | string[]> {
  const replaced = new Set(injected.map((h) => h.name.toLowerCase()));
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    // Host is set from the destination the policy checked.
    if (lower === 'host' || replaced.has(lower) || !isEndToEnd(lower, raw)) continue;
    const existing = headers[lower];
    headers[lower] = existing === undefined ? raw[i + 1]! : [...(Array.isArray(existing) ? existing : [existing]), raw[i + 1]!];
  }
  for (const header of injected) headers[header.name.toLowerCase()] = header.value;
  return headers;
}

/** Whether a header (lowercase name) belongs to the message rather than this hop. */
function isEndToEnd(lower: string, raw: string[]): boolean {
  if (HOP_BY_HOP.has(lower) || lower.startsWith('proxy-')) return false;
  // Headers named in Connection are hop-by-hop too.
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (
      raw[i]!.toLowerCase() === 'connection' &&
      raw[i + 1]!.toLowerCase()
        .split(',')
        .some((token) => token.trim() === lower)
    )
      return false;
  }
  return true;
}

/** Response raw headers minus hop-by-hop ones (Node frames the body to the sandbox itself). */
function filteredRaw(raw: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const lower = raw[i]!.toLowerCase();
    if (isEndToEnd(lower, raw)) out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}
