/**
 * WebSockets on deployment URLs (`GET /d/{deployment_id}/…` with `Upgrade: websocket`, e.g. a
 * thread's protocol v2 event stream) are tunnelled to the deployment's agent server after the
 * checks every proxied request passes (deployment-proxy.ts `admit`).
 *
 * - Credentials: X-Api-Key / Authorization as on HTTP requests. Browsers cannot set headers on a
 *   WebSocket, so the API key may also come as a subprotocol, `berth.api-key.<key>`, offered beside
 *   `berth`; the answer names `berth` (never the key's protocol) unless the agent server chose one
 *   of the others. Never from the query string, which proxies and servers log.
 * - Neither the key's subprotocol nor `berth` reaches the agent server (nor the platform
 *   credentials, as on HTTP); with custom auth every header passes untouched, as on HTTP.
 * - A browser's upgrade (it has an Origin) must come from an origin the deployment's `http.cors`
 *   allows: the gateway asks the agent server with a preflight-shaped OPTIONS, so the deployment's
 *   own policy decides; otherwise 403 before anything is forwarded.
 * - Refusals are plain HTTP answers before switching protocols: 401, 403, 404 (unknown or another
 *   tenant's), 503 (nothing serves), and the agent server's own refusal as it sent it.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { DEPLOYMENT_CREDENTIAL_HEADER, httpErrorBody, refuseUpgrade } from '@berth/http';
import { admit, answerHeaders, PROXY_PATH, requestIdOf, upstreamRequest, type DeploymentProxyDeps } from './deployment-proxy.js';
import type { ResolvedDeployment } from './resolver.js';
import { PROXY_SOCKET_CREDENTIALS } from '../access.js';

/** The subprotocol a browser app offers beside the key's, and gets answered. */
export const BERTH_SUBPROTOCOL = 'berth';
/** `berth.api-key.<key>`: an API key where a browser cannot put headers. */
export const API_KEY_SUBPROTOCOL_PREFIX = 'berth.api-key.';

function offeredProtocols(req: IncomingMessage): string[] {
  return String(req.headers['sec-websocket-protocol'] ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
}

export class DeploymentSockets {
  /** Open tunnels: both sockets, destroyed on close(). */
  private readonly open = new Set<Duplex>();

  constructor(private readonly deps: DeploymentProxyDeps) {}

  /** Takes the upgrade when it is for a deployment URL (returns false otherwise). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): boolean {
    const match = PROXY_PATH.exec(req.url ?? '/');
    if (!match) return false;
    socket.on('error', (error) => this.deps.logger.debug({ err: error }, 'deployment socket error'));
    this.upgrade(req, socket, head, match[1]!, match[2] ?? '').catch((error: unknown) => {
      const { status, body, headers } = httpErrorBody(error);
      if (status >= 500) this.deps.logger.error({ err: error, deploymentId: match[1] }, 'WebSocket proxying failed');
      refuseUpgrade(socket, status, body.detail, headers);
    });
    return true;
  }

  /** Ends every tunnel (clients reconnect to another gateway). */
  close(): void {
    for (const socket of this.open) socket.destroy();
    this.open.clear();
  }

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, rawId: string, rest: string): Promise<void> {
    const id = rawId.toLowerCase();
    const path = rest.startsWith('/') ? rest : `/${rest}`;
    const requestId = requestIdOf(req);
    const offered = offeredProtocols(req);
    const keyProtocol = offered.find((p) => p.startsWith(API_KEY_SUBPROTOCOL_PREFIX));
    const authHeaders = { ...req.headers };
    if (keyProtocol && authHeaders['x-api-key'] === undefined && authHeaders.authorization === undefined) {
      authHeaders['x-api-key'] = keyProtocol.slice(API_KEY_SUBPROTOCOL_PREFIX.length);
    }
    const admission = await admit(this.deps, { headers: authHeaders, method: req.method }, rawId, PROXY_SOCKET_CREDENTIALS);
    if (!admission.ok) return refuseUpgrade(socket, admission.status, admission.detail, admission.headers);
    const { target, headers } = admission;
    const origin = req.headers.origin;
    if (origin !== undefined && !(await this.originAllowed(req, id, target, origin, requestId))) {
      return refuseUpgrade(socket, 403, `Origin ${origin} is not allowed by the deployment's http.cors`);
    }
    // Ours are for the gateway; the rest are the app's, for the agent server to choose from.
    const theirs = target.customAuth ? offered : offered.filter((p) => p !== BERTH_SUBPROTOCOL && !p.startsWith(API_KEY_SUBPROTOCOL_PREFIX));
    if (theirs.length) headers['sec-websocket-protocol'] = theirs.join(', ');
    else delete headers['sec-websocket-protocol'];
    headers.connection = 'Upgrade';
    headers.upgrade = String(req.headers.upgrade);
    if (socket.destroyed) return;
    const upstream = upstreamRequest(this.deps, req, 'GET', id, target.upstreamUrl, path, headers, requestId);
    socket.once('close', () => upstream.destroy());
    upstream.once('upgrade', (answer, upstreamSocket, upstreamHead) => {
      const lines = ['HTTP/1.1 101 Switching Protocols', 'Connection: Upgrade', `Upgrade: ${String(answer.headers.upgrade)}`];
      for (const [name, value] of Object.entries(answerHeaders(answer.headers))) {
        if (name === 'sec-websocket-protocol') continue;
        for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
      }
      const chosen = answer.headers['sec-websocket-protocol'] ?? (offered.includes(BERTH_SUBPROTOCOL) ? BERTH_SUBPROTOCOL : undefined);
      if (chosen) lines.push(`sec-websocket-protocol: ${chosen}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (upstreamHead.length) socket.write(upstreamHead);
      // What the client sent right after its upgrade request, before it was answered.
      if (head.length) upstreamSocket.write(head);
      this.tunnel(socket, upstreamSocket);
    });
    upstream.once('response', (answer) => {
      // The agent server refused the upgrade: its answer, as it sent it.
      const lines = [`HTTP/1.1 ${answer.statusCode ?? 502} ${answer.statusMessage ?? ''}`, 'Connection: close'];
      for (const [name, value] of Object.entries(answerHeaders(answer.headers)))
        for (const one of Array.isArray(value) ? value : [value]) lines.push(`${name}: ${one}`);
      socket.write(`${lines.join('\r\n')}\r\n\r\n`);
      answer.pipe(socket);
    });
    upstream.once('error', (error) => {
      if (socket.destroyed) return;
      this.deps.logger.warn({ err: error, deploymentId: id }, 'agent server unreachable for a WebSocket');
      refuseUpgrade(socket, 503, `The agent server of deployment ${id} is restarting; retry shortly`, { 'Retry-After': '5' });
    });
    upstream.end();
  }

  private tunnel(client: Duplex, upstream: Duplex): void {
    this.open.add(client).add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.open.delete(client);
      this.open.delete(upstream);
    };
    for (const side of [client, upstream]) side.once('close', end).once('error', end);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Whether the deployment's own CORS policy allows `origin`, asked of its agent server. */
  private originAllowed(req: IncomingMessage, id: string, target: ResolvedDeployment, origin: string, requestId: string): Promise<boolean> {
    const headers: Record<string, string> = { origin, 'access-control-request-method': 'GET' };
    if (target.upstreamCredential) headers[DEPLOYMENT_CREDENTIAL_HEADER] = target.upstreamCredential;
    return new Promise((resolve) => {
      const ask = upstreamRequest(this.deps, req, 'OPTIONS', id, target.upstreamUrl, '/', headers, requestId);
      ask.once('response', (answer) => {
        answer.resume();
        const allowed = answer.headers['access-control-allow-origin'];
        resolve(allowed === '*' || allowed === origin);
      });
      ask.once('error', () => resolve(false));
      ask.end();
    });
  }
}
