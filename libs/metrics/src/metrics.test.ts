/**
 * The metrics listener and the helpers services define their metrics with: the listener answers
 * `/metrics` only; a gauge sums its sources and leaves out one that fails without failing the
 * scrape; HTTP requests are labelled by template, with odd methods and unmatched routes folded
 * into one value each, so a caller choosing methods and URLs cannot grow the series.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { PassThrough } from 'node:stream';
import { createLogger } from '@berth/log';
import { counter, gauge, observeHttpRequest, parseMetrics, sampleSum, scrape, startMetricsListener, type RunningMetricsListener } from './index.js';

let listener: RunningMetricsListener;
beforeAll(async () => {
  listener = await startMetricsListener({ port: 0 });
});
afterAll(async () => {
  await listener?.close();
});

const samples = async () => parseMetrics((await scrape()).body);

describe('the metrics listener', () => {
  it('answers GET /metrics in the Prometheus text format, on loopback, and nothing else', async () => {
    expect(listener.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const response = await fetch(`${listener.url}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await response.text();
    expect(text).toContain('# TYPE berth_process_cpu_seconds_total counter');
    expect(sampleSum(parseMetrics(text), 'berth_process_cpu_seconds_total')).toBeGreaterThan(0);
    expect((await fetch(`${listener.url}/`)).status).toBe(404);
    expect((await fetch(`${listener.url}/healthz`)).status).toBe(404);
    const post = await fetch(`${listener.url}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
  });
});

describe('gauges read at scrape time', () => {
  it('sum what their sources read, leave out (and log) a failing source, and forget a removed one', async () => {
    const depth = gauge<'status'>({ name: 'berth_test_depth', help: 'test', labelNames: ['status'] });
    const removeA = depth.source(() => [{ labels: { status: 'pending' }, value: 2 }]);
    depth.source(async () => [
      { labels: { status: 'pending' }, value: 3 },
      { labels: { status: 'running' }, value: 1 },
    ]);
    const logged: string[] = [];
    const destination = new PassThrough().on('data', (chunk: Buffer) => logged.push(chunk.toString()));
    const logger = createLogger({ name: 'test', destination });
    const lines = () =>
      logged
        .join('')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as unknown);
    const removeBroken = depth.source(() => {
      throw new Error('the database is down');
    }, logger);
    let read = await samples();
    expect(sampleSum(read, 'berth_test_depth', { status: 'pending' })).toBe(5);
    expect(sampleSum(read, 'berth_test_depth', { status: 'running' })).toBe(1);
    // The failure is not silent: its source's log says which metric and why.
    expect(lines()).toEqual([
      expect.objectContaining({ level: 40, metric: 'berth_test_depth', err: expect.objectContaining({ message: 'the database is down' }) }),
    ]);
    removeA();
    removeBroken();
    read = await samples();
    expect(sampleSum(read, 'berth_test_depth', { status: 'pending' })).toBe(3);
    // Defined again (a module loaded twice): the same metric, not a registration error.
    expect(gauge({ name: 'berth_test_depth', help: 'test' })).toBe(depth);
    expect(counter({ name: 'berth_test_total', help: 'test' })).toBe(counter({ name: 'berth_test_total', help: 'test' }));
  });
});

describe('HTTP request metrics', () => {
  it('label by route template and fold unknown methods and unmatched routes into one value each', async () => {
    const before = await samples();
    observeHttpRequest({ method: 'GET', route: '/threads/{thread_id}', status: 200, seconds: 0.01 });
    observeHttpRequest({ method: 'BREW', route: undefined, status: 404, seconds: 0.001 });
    observeHttpRequest({ method: 'PROPFIND', route: undefined, status: 404, seconds: 0.001 });
    const after = await samples();
    const moved = (labels: Record<string, string>) =>
      sampleSum(after, 'berth_http_request_duration_seconds_count', labels) - sampleSum(before, 'berth_http_request_duration_seconds_count', labels);
    expect(moved({ method: 'GET', route: '/threads/{thread_id}', status: '200' })).toBe(1);
    expect(moved({ method: 'other', route: 'unmatched', status: '404' })).toBe(2);
    expect(after.filter((s) => s.labels.method === 'BREW' || s.labels.method === 'PROPFIND')).toEqual([]);
  });

  it('reads back label values with quotes and backslashes as they were', () => {
    expect(parseMetrics('m{a="say \\"hi\\"",b="c:\\\\d"} 2\n# HELP m x\n')).toEqual([{ name: 'm', labels: { a: 'say "hi"', b: 'c:\\d' }, value: 2 }]);
  });
});
