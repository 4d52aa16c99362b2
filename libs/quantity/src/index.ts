/**
 * Kubernetes resource quantities (`500m`, `1.5`, `512Mi`, `2Gi`, `1e3`): the one parser and the one
 * formatter of CPU and memory amounts, for deployment resource specs, sandbox templates and the
 * manifests built from them. Parsing follows Kubernetes' `resource.Quantity`: a signed decimal
 * number, then a binary suffix (Ki…Ei), a decimal suffix (n, u, m, k, M, G, T, P, E) or a decimal
 * exponent (`e3`, `E-2`).
 */

/** Text that is not a quantity; the message says what one looks like. */
export class QuantityError extends Error {
  constructor(readonly text: string) {
    super(`${JSON.stringify(text)} is not a quantity: a number with an optional suffix, like 500m, 0.5, 512Mi or 2Gi`);
    this.name = 'QuantityError';
  }
}

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };
const QUANTITY = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$/;

/** The amount a quantity stands for (cores for CPU, bytes for memory and storage). */
export function parseQuantity(text: string): number {
  const match = QUANTITY.exec(text);
  if (!match) throw new QuantityError(text);
  const [, number, suffix = '', exponent] = match;
  const scale = exponent !== undefined ? 10 ** Number(exponent) : (BINARY[suffix] ?? DECIMAL[suffix]!);
  const value = Number(number) * scale;
  if (!Number.isFinite(value)) throw new QuantityError(text);
  return value;
}

/** Whether `text` is a quantity of at least zero (what a resource request may be). */
export function isResourceQuantity(text: string): boolean {
  try {
    return parseQuantity(text) >= 0;
  } catch {
    return false;
  }
}

/** CPU cores as a quantity: whole cores plain, fractions in millicores (at least 1m). */
export function cpuQuantity(cores: number): string {
  const millis = Math.max(1, Math.round(cores * 1000));
  return millis % 1000 === 0 ? String(millis / 1000) : `${millis}m`;
}

/** A byte count as a quantity: binary units when exact (up to Gi), else plain bytes. */
export function bytesQuantity(bytes: number): string {
  const whole = Math.max(1, Math.round(bytes));
  for (const [unit, size] of [
    ['Gi', 1024 ** 3],
    ['Mi', 1024 ** 2],
    ['Ki', 1024],
  ] as const) {
    if (whole % size === 0) return `${whole / size}${unit}`;
  }
  return String(whole);
}

/** MiB as a quantity (at least 1Mi). */
export function memoryQuantity(mib: number): string {
  return `${Math.max(1, Math.round(mib))}Mi`;
}
