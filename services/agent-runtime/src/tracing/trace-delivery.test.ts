/** Trace delivery's retries, drop warnings and drop metrics on a clock the test moves (the trace store is a closed port). */
import { beforeAll, describe, expect, it } from '@jest/globals';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock } from '@berth/clock';
import { parseMetrics, sampleSum, scrape } from '@berth/metrics';
import { captureLogger, until } from '@berth/testing';
import { TraceDelivery } from './trace-delivery.js';

let closedUrl: string;
beforeAll(async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closedUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await new Promise((resolve) => server.close(resolve));
});

describe('TraceDelivery', () => {
  it('retries after its delay, then reports the drops of a window in one warning at the end of the window', async () => {
    const clock = new ManualClock();
    const logs = captureLogger('trace-delivery');
    const delivery = new TraceDelivery(logs.logger, { attempts: 2, retryDelayMs: 1000, warnIntervalMs: 30_000, clock });
    const warnings = () =>
      logs
        .lines()
        .filter((l) => typeof l.droppedRuns === 'number')
        .map((l) => l.droppedRuns);
    const post = (ids: string[]) =>
      delivery.fetch(`${closedUrl}/runs/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ post: ids.map((id) => ({ id })) }),
      });
    // Only a timer of the delivery's is on the clock: the retry's wait, then the warning window.
    const oneTimer = (what: string) => until(what, () => clock.pending === 1, 5_000, 5);

    expect((await post(['a', 'b'])).status).toBe(202);
    await oneTimer('the retry to wait');
    await clock.advance(999);
    expect(clock.pending).toBe(1);
    await clock.advance(1);
    await oneTimer('the drop to open a warning window');
    await clock.advance(29_999);
    expect(warnings()).toEqual([]);
    await clock.advance(1);
    expect(warnings()).toEqual([2]);
    // Nothing dropped since: no more warnings, however long.
    await clock.advance(600_000);
    expect(warnings()).toEqual([2]);

    expect((await post(['c'])).status).toBe(202);
    await oneTimer('the retry to wait');
    await clock.advance(1000);
    await oneTimer('the drop to open a warning window');
    await clock.advance(30_000);
    expect(warnings()).toEqual([2, 1]);
    await delivery.close(0);
    expect(warnings()).toEqual([2, 1]);
    // The metrics count the drops as they happen: two requests, three runs, none sent.
    const metrics = parseMetrics((await scrape()).body);
    expect(sampleSum(metrics, 'berth_agent_trace_requests_total', { result: 'dropped' })).toBe(2);
    expect(sampleSum(metrics, 'berth_agent_trace_runs_dropped_total')).toBe(3);
    expect(sampleSum(metrics, 'berth_agent_trace_requests_total', { result: 'sent' })).toBe(0);
  });
});
