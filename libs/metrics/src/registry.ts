/** The process's registry and the helpers that define metrics on it (see index.ts for the conventions). */
import type { Logger } from '@berth/log';
import client from 'prom-client';

const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'berth_' });

/** The Prometheus text format of every metric of the process, and its content type. */
export async function scrape(): Promise<{ contentType: string; body: string }> {
  return { contentType: registry.contentType, body: await registry.metrics() };
}

/** Latency buckets in seconds, from 5 ms (a cached lookup) to 1 minute (a long call). */
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Duration buckets in seconds of long work (runs, builds, deploys, exports): 100 ms to 2 hours. */
export const DURATION_BUCKETS = [0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200];

interface MetricSpec<L extends string> {
  name: string;
  help: string;
  labelNames?: readonly L[];
}

// A module defining its metrics may be loaded again in one process (the embedded platform loads a
// service's modules once, tests may load them per file): the metric registered first is reused.
function existing<T>(name: string): T | undefined {
  return registry.getSingleMetric(name) as T | undefined;
}

export function counter<L extends string = never>(spec: MetricSpec<L>): client.Counter<L> {
  return existing(spec.name) ?? new client.Counter<L>({ ...spec, labelNames: spec.labelNames ?? [], registers: [registry] });
}

export interface HistogramSpec<L extends string> extends MetricSpec<L> {
  /** Upper bounds of the buckets, in the metric's unit. @default 5 ms to 1 minute (latencies in seconds) */
  buckets?: number[];
}

export function histogram<L extends string = never>(spec: HistogramSpec<L>): client.Histogram<L> {
  return (
    existing(spec.name) ??
    new client.Histogram<L>({ ...spec, labelNames: spec.labelNames ?? [], buckets: spec.buckets ?? LATENCY_BUCKETS, registers: [registry] })
  );
}

/** One reading of a gauge: its value for a set of labels. */
export interface GaugeReading<L extends string> {
  labels?: Partial<Record<L, string>>;
  value: number;
}

/** A gauge read at scrape time from every source registered (see {@link SourcedGauge.source}). */
export interface SourcedGauge<L extends string> {
  /**
   * Adds what this source reads at each scrape (summed with other sources' values of the same
   * labels: several agent servers in one test process). A read that fails is logged on `log` and
   * left out of that scrape. Returns the function removing the source.
   */
  source(read: () => Promise<GaugeReading<L>[]> | GaugeReading<L>[], log?: Logger): () => void;
}

/** Readings of one label's values from counts keyed by them: `{ ready: 2 }` → `status="ready"` 2. */
export function readingsOf<L extends string>(label: L, counts: Record<string, number>): GaugeReading<L>[] {
  return Object.entries(counts).map(([value, count]) => ({ labels: { [label]: value } as Partial<Record<L, string>>, value: count }));
}

/**
 * A gauge whose value is read when scraped (a queue's depth from its table, a pool's counts), from
 * the sources that servers register while they run. A failing source leaves its values out of that
 * scrape rather than failing it, so the rest of `/metrics` still answers.
 */
export function gauge<L extends string = never>(spec: MetricSpec<L>): SourcedGauge<L> {
  const known = sourcedGauges.get(spec.name) as SourcedGauge<L> | undefined;
  if (known) return known;
  const sources = new Map<() => Promise<GaugeReading<L>[]> | GaugeReading<L>[], Logger | undefined>();
  new client.Gauge<L>({
    ...spec,
    labelNames: spec.labelNames ?? [],
    registers: [registry],
    async collect() {
      const readings = await Promise.all(
        [...sources].map(([read, log]) =>
          Promise.resolve()
            .then(read)
            .catch((error: unknown): GaugeReading<L>[] => {
              log?.warn({ err: error, metric: spec.name }, 'could not read a metric: it is left out of this scrape');
              return [];
            }),
        ),
      );
      this.reset();
      for (const reading of readings.flat()) {
        if (reading.labels) this.inc(reading.labels as Partial<Record<L, string | number>>, reading.value);
        else this.inc(reading.value);
      }
    },
  });
  const made: SourcedGauge<L> = {
    source(read, log) {
      sources.set(read, log);
      return () => sources.delete(read);
    },
  };
  sourcedGauges.set(spec.name, made);
  return made;
}
const sourcedGauges = new Map<string, SourcedGauge<string>>();

/** Seconds since `started` (a `performance.now()` reading). */
export function secondsSince(started: number): number {
  return (performance.now() - started) / 1000;
}
