/**
 * The origin users reach the gateway at, for every URL the gateway hands out (login approval
 * links, deployment URLs, the X-Forwarded-Host/-Proto it tells agent servers). It never comes from
 * a request header: `Host` and `X-Forwarded-*` are the client's to choose, so a link built from
 * them could point a user at another site (`Host: evil.example` → `http://evil.example/login/…`).
 */
import type { IncomingMessage } from 'node:http';

/** The configured public URL (`BERTH_PUBLIC_URL`), else the gateway's own address this connection reached. */
export function publicOrigin(req: IncomingMessage, publicUrl: string | undefined): string {
  if (publicUrl) return publicUrl.replace(/\/+$/, '');
  // The listening address (or, listening on all interfaces, the one the client connected to).
  const address = (req.socket.localAddress ?? '127.0.0.1').replace(/^::ffff:/, '');
  const host = address.includes(':') ? `[${address}]` : address;
  const scheme = 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http';
  return `${scheme}://${host}:${req.socket.localPort}`;
}
