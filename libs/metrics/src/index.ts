/**
 * `@berth/metrics` — Prometheus metrics (prom-client) of a Berth process. One registry per process
 * (the embedded platform's services share it, as they share the process), with Node's process
 * metrics, the HTTP and gRPC server metrics every service records through `@berth/http` and
 * `@berth/rpc`, and what each service adds with `counter`/`histogram`/`gauge`.
 *
 * Conventions (https://prometheus.io/docs/practices/naming/): names start with `berth_`, carry
 * their unit (`_seconds`, `_bytes`, `_total` for counters); labels take few values — a route's
 * template, never its URL; a status, never an id of a tenant, deployment, thread or run.
 */
export { DURATION_BUCKETS, counter, gauge, histogram, readingsOf, scrape, secondsSince } from './registry.js';
export type { GaugeReading, SourcedGauge } from './registry.js';
export { observeGrpcCall, observeHttpRequest } from './servers.js';
export { serveMetrics, startMetricsListener } from './listener.js';
export type { MetricsListenerOptions, RunningMetricsListener } from './listener.js';
export { parseMetrics, sampleSum } from './parse.js';
export type { Sample } from './parse.js';
