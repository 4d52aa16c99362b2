/**
 * A chart of values over time as plain SVG: bars drawn from the baseline (a later series over an
 * earlier one, e.g. errors over runs) or lines (a gap where a value is missing). Screen readers get
 * the title and a description; the same figures are in a table under "Data".
 */
import { useId } from 'react';

export interface Series {
  name: string;
  kind: 'bar' | 'line';
  /** Tailwind classes colouring it, light and dark (`fill-…` for bars, `stroke-…` for lines). */
  tone: string;
  /** One value per bucket; null where there is none. */
  values: (number | null)[];
}

interface ChartProps {
  title: string;
  /** What the chart shows in words (the totals), read out with it. */
  description: string;
  /** Each bucket's start, ISO. */
  buckets: string[];
  series: Series[];
  format: (value: number) => string;
}

const WIDTH = 480;
const HEIGHT = 160;
const LEFT = 56;
const BOTTOM = 20;
const TOP = 8;

const timeLabel = (iso: string, spanMs: number) =>
  new Date(iso).toLocaleString('en-US', spanMs > 2 * 86_400_000 ? { month: 'short', day: 'numeric' } : { hour: '2-digit', minute: '2-digit' });

export function TimeChart({ title, description, buckets, series, format }: ChartProps) {
  const id = useId();
  const max = Math.max(0, ...series.flatMap((s) => s.values.map((v) => v ?? 0)));
  const plotWidth = WIDTH - LEFT;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const step = buckets.length > 0 ? plotWidth / buckets.length : plotWidth;
  const y = (value: number) => TOP + plotHeight - (max > 0 ? (value / max) * plotHeight : 0);
  const x = (index: number) => LEFT + index * step;
  const spanMs = buckets.length > 1 ? Date.parse(buckets.at(-1)!) - Date.parse(buckets[0]!) : 0;

  return (
    <figure className="rounded-md border border-slate-200 bg-white p-3 dark:border-slate-800 dark:bg-slate-900">
      <figcaption className="flex flex-wrap items-baseline justify-between gap-2 text-sm">
        <span className="font-medium">{title}</span>
        <span className="flex gap-3 text-xs text-slate-700 dark:text-slate-300">
          {series.map((s) => (
            <span key={s.name} className="flex items-center gap-1">
              <svg width="10" height="10" aria-hidden="true">
                {s.kind === 'bar' ? (
                  <rect width="10" height="10" className={s.tone} />
                ) : (
                  <line x1="0" y1="5" x2="10" y2="5" strokeWidth="2" className={s.tone} />
                )}
              </svg>
              {s.name}
            </span>
          ))}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} className="mt-2 w-full" role="img" aria-labelledby={`${id}-t ${id}-d`}>
        <title id={`${id}-t`}>{title}</title>
        <desc id={`${id}-d`}>{description}</desc>
        <g className="fill-slate-700 text-[10px] dark:fill-slate-300" aria-hidden="true">
          <text x={LEFT - 6} y={TOP + 8} textAnchor="end">
            {format(max)}
          </text>
          <text x={LEFT - 6} y={TOP + plotHeight} textAnchor="end">
            {format(0)}
          </text>
          {buckets.length > 0 ? (
            <>
              <text x={LEFT} y={HEIGHT - 4}>
                {timeLabel(buckets[0]!, spanMs)}
              </text>
              <text x={WIDTH} y={HEIGHT - 4} textAnchor="end">
                {timeLabel(buckets.at(-1)!, spanMs)}
              </text>
            </>
          ) : null}
        </g>
        <line x1={LEFT} y1={TOP + plotHeight} x2={WIDTH} y2={TOP + plotHeight} strokeWidth="1" className="stroke-slate-300 dark:stroke-slate-700" />
        {series.map((s) =>
          s.kind === 'bar' ? (
            <g key={s.name} className={s.tone}>
              {s.values.map((value, i) =>
                value ? <rect key={i} x={x(i) + step * 0.1} width={Math.max(1, step * 0.8)} y={y(value)} height={TOP + plotHeight - y(value)} /> : null,
              )}
            </g>
          ) : (
            <path key={s.name} d={linePath(s.values, (i) => x(i) + step / 2, y)} fill="none" strokeWidth="1.5" className={s.tone} />
          ),
        )}
      </svg>
      <details className="mt-1 text-xs">
        <summary className="cursor-pointer text-slate-700 dark:text-slate-300">Data</summary>
        <div className="max-h-48 overflow-auto" tabIndex={0} role="region" aria-label={`${title}: data`}>
          <table className="w-full text-left">
            <caption className="sr-only">{title}</caption>
            <thead>
              <tr>
                <th scope="col" className="pr-3 font-medium">
                  From
                </th>
                {series.map((s) => (
                  <th key={s.name} scope="col" className="pr-3 font-medium">
                    {s.name}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {buckets.map((start, i) => (
                <tr key={start}>
                  <th scope="row" className="pr-3 font-normal">
                    <time dateTime={start}>{new Date(start).toLocaleString()}</time>
                  </th>
                  {series.map((s) => (
                    <td key={s.name} className="pr-3 tabular-nums">
                      {s.values[i] == null ? '—' : format(s.values[i]!)}
                    </td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </details>
    </figure>
  );
}

/** An SVG path through the values, broken where one is missing. */
function linePath(values: (number | null)[], x: (i: number) => number, y: (v: number) => number): string {
  let d = '';
  let pen = false;
  values.forEach((value, i) => {
    if (value == null) {
      pen = false;
      return;
    }
    d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(value).toFixed(1)}`;
    pen = true;
  });
  return d;
}
