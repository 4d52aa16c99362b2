/** How the console writes counts, shares, durations and costs (one way on every page). */

const integer = new Intl.NumberFormat('en-US');
const compact = new Intl.NumberFormat('en-US', { notation: 'compact', maximumFractionDigits: 1 });

/** "2,500", "275K" from 100,000 on; "—" for none. */
export const formatCount = (n: number | null | undefined) => (n == null ? '—' : n >= 100_000 ? compact.format(n) : integer.format(n));

/** "9.3 %" of a rate between 0 and 1; "—" for none. */
export const formatPercent = (rate: number | null | undefined) => (rate == null ? '—' : `${(rate * 100).toFixed(rate > 0 && rate < 0.001 ? 2 : 1)} %`);

/** "340 ms", "1.25 s", "12.5 s", "2 min 5 s", "3 h 20 min"; "—" for none. */
export function formatSeconds(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return '—';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  const whole = Math.round(seconds);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

/** {@link formatSeconds} of milliseconds. */
export const formatDuration = (ms: number | null | undefined) => formatSeconds(ms == null ? ms : ms / 1000);

/** A chart's bucket: "5 min", "2 h", "1 d" (whole units), else as a duration. */
export function formatInterval(seconds: number): string {
  for (const [unit, size] of [
    ['d', 86_400],
    ['h', 3600],
    ['min', 60],
  ] as const) {
    if (seconds >= size && seconds % size === 0) return `${seconds / size} ${unit}`;
  }
  return formatSeconds(seconds);
}

/** "$0.25", "$0.00088" (a call's cost is a fraction of a cent); "—" for none. */
export function formatCost(cost: number | null | undefined): string {
  if (cost == null) return '—';
  if (cost === 0) return '$0';
  return cost < 0.01 ? `$${cost.toPrecision(2)}` : `$${cost.toFixed(2)}`;
}
