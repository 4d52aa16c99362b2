/**
 * Server-sent events over an express response: no buffering anywhere on the way (compression off,
 * `X-Accel-Buffering: no` for proxies), compact JSON on one `data:` line per event.
 */
import type { Response } from 'express';

export interface SseEvent {
  event: string;
  data: unknown;
  /** Sent as `id:` so a client can resume with Last-Event-ID. */
  id?: string;
}

export interface SseOptions {
  /**
   * Interval of `: heartbeat` comments that keep idle connections open through proxies.
   * @default 15000
   */
  heartbeatMs?: number;
  /** Extra response headers, e.g. Content-Location. */
  headers?: Record<string, string>;
  /** Where the heartbeat's timer runs (a `Clock` of @berth/clock). @default Node's timers */
  clock?: IntervalClock;
}

/** The part of a `Clock` (@berth/clock) the heartbeat needs. */
export interface IntervalClock {
  setInterval(fn: () => void, ms: number): { cancel(): void };
}

const nodeTimers: IntervalClock = {
  setInterval(fn, ms) {
    const handle = setInterval(fn, ms).unref();
    return { cancel: () => clearInterval(handle) };
  },
};

export class SseWriter {
  private readonly heartbeat: { cancel(): void };
  private ended = false;

  constructor(
    private readonly res: Response,
    options: SseOptions = {},
  ) {
    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    for (const [name, value] of Object.entries(options.headers ?? {})) res.setHeader(name, value);
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    this.heartbeat = (options.clock ?? nodeTimers).setInterval(() => this.comment('heartbeat'), options.heartbeatMs ?? 15_000);
    res.on('close', () => this.stop());
  }

  /** True once the client went away or {@link end} was called. */
  get closed(): boolean {
    return this.ended || this.res.destroyed;
  }

  /** Resolves when the client disconnects or the stream is ended. */
  onClose(listener: () => void): void {
    this.res.on('close', listener);
  }

  send(event: SseEvent): boolean {
    if (this.closed) return false;
    let frame = '';
    if (event.id !== undefined) frame += `id: ${event.id}\n`;
    frame += `event: ${event.event}\ndata: ${JSON.stringify(event.data ?? null)}\n\n`;
    return this.res.write(frame);
  }

  comment(text: string): void {
    if (!this.closed) this.res.write(`: ${text.replace(/\n/g, ' ')}\n\n`);
  }

  end(): void {
    if (this.ended) return;
    this.stop();
    this.res.end();
  }

  private stop(): void {
    this.ended = true;
    this.heartbeat.cancel();
  }
}
