/**
 * A webhook receiver on 127.0.0.1 for tests of run webhooks and A2A push notifications, and a
 * Standard Webhooks verifier written from the spec (not from the server's signing code).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Standard Webhooks verification, from the spec: HMAC-SHA256 of `id.timestamp.body` with the secret's decoded bytes. */
export function verify(secretText: string, headers: http.IncomingHttpHeaders, body: string): boolean {
  const id = headers['webhook-id'] as string;
  const timestamp = headers['webhook-timestamp'] as string;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > 300) return false;
  const key = Buffer.from(secretText.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return (headers['webhook-signature'] as string).split(' ').some((entry) => {
    const [version, signature] = entry.split(',');
    const given = Buffer.from(signature ?? '', 'base64');
    return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
  });
}

export interface Received {
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
  at: number;
  /** A held request the sender gave up on (it closed the connection unanswered). */
  abandoned?: boolean;
}

/** What the receiver does with the next request to a path: answer a status, or hold it unanswered. */
export type Behaviour = number | 'hold';

/** A webhook receiver: per path, a script of answers (the last repeats) and the requests it got. */
export class Receiver {
  readonly received = new Map<string, Received[]>();
  private readonly scripts = new Map<string, Behaviour[]>();
  private readonly held: http.ServerResponse[] = [];
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const path = new URL(req.url!, 'http://x').pathname;
      const list = this.received.get(path) ?? [];
      const entry: Received = { url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString(), at: Date.now() };
      list.push(entry);
      this.received.set(path, list);
      const script = this.scripts.get(path) ?? [200];
      const behaviour = script.length > 1 ? script.shift()! : script[0]!;
      if (behaviour === 'hold') {
        this.held.push(res);
        res.once('close', () => {
          if (!res.writableFinished) entry.abandoned = true;
        });
      } else res.writeHead(behaviour).end();
    });
  });
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  script(path: string, behaviours: Behaviour[]): string {
    this.scripts.set(path, behaviours);
    return `${this.url}${path}`;
  }

  requests(path: string): Received[] {
    return this.received.get(path) ?? [];
  }

  /** Answers every request held so far with `status`. */
  release(status: number): void {
    for (const res of this.held.splice(0)) res.writeHead(status).end();
  }

  async close(): Promise<void> {
    for (const res of this.held) res.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}
