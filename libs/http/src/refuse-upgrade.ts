/**
 * The answer to a WebSocket upgrade a server refuses (before switching protocols): a plain
 * HTTP response with a JSON `{"detail": …}` body, written on the raw socket, which is then closed.
 */
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

/** Writes a plain HTTP answer on a socket that asked to upgrade, and closes it. */
export function refuseUpgrade(socket: Duplex, status: number, detail: unknown, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ detail });
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(body)}`,
    'Connection: close',
    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${body}`);
}
