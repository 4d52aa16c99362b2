/** How the trace page writes durations, tokens and costs. */

/** "340 ms", "1.25 s", "2 min 5 s". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** "$0.0012" (costs of one call are fractions of a cent). */
export function formatCost(cost: number): string {
  return `$${cost < 0.01 ? cost.toPrecision(2) : cost.toFixed(cost < 1 ? 4 : 2)}`;
}
